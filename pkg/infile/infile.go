// Package infile is the one open of a file that a flag or an argument names (a fleet file, a
// build record, a manifest, a keyring, a CA bundle, an images file, a sysext): what cannot be
// that file is refused before any read, the way disk.OpenFile refuses what cannot be an image.
// A directory, a named pipe (opening one waits for a writer forever), a device (/dev/zero
// reads without end) and a socket are refused from stat; the open is non-blocking in case the
// path changed in between, and checked again on the descriptor; the size is capped at what
// such a file can sensibly hold. Every refusal names the flag, the kind of file and the limit,
// and is an errs.ErrInvalid (exit 2).
package infile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Kind is what a flag or argument names, and the most bytes one can sensibly hold.
type Kind struct {
	Name string // "fleet file (YAML)", as messages say it
	Max  int64
	// Dir: a directory is what is asked for (--binaries); FileOrDir: either (--protect).
	Dir, FileOrDir bool
	// URLOK: the value may be an http(s) URL instead (build --sysext); a URL is not a path.
	URLOK bool
}

const (
	kiB = 1 << 10
	MiB = 1 << 20
	giB = 1 << 30
)

// The kinds the CLI's flags and arguments name. The limits are far above any real file and far
// below what would hurt the machine: a 200 MB "record" is a mistake, not a record.
var (
	Config     = Kind{Name: "fleet file (YAML)", Max: 4 * MiB}
	Record     = Kind{Name: "build record (JSON)", Max: 4 * MiB}
	SBOM       = Kind{Name: "CycloneDX SBOM (JSON)", Max: 64 * MiB}
	SPDX       = Kind{Name: "Flatcar SBOM (SPDX JSON, flatcar_production_image_sbom.json)", Max: 256 * MiB}
	Signature  = Kind{Name: "detached signature", Max: 64 * kiB}
	Manifest   = Kind{Name: "manifest (YAML)", Max: 64 * MiB}
	Protect    = Kind{Name: "manifest or build record, or a directory of them", Max: 64 * MiB, FileOrDir: true}
	Keyring    = Kind{Name: "OpenPGP keyring", Max: 4 * MiB}
	SigningKey = Kind{Name: "signing key (PEM, cosign or OpenPGP)", Max: 1 * MiB}
	PublicKey  = Kind{Name: "public key or certificate (PEM or OpenPGP)", Max: 1 * MiB}
	Cert       = Kind{Name: "PEM X.509 certificate", Max: 1 * MiB}
	CloudsYAML = Kind{Name: "clouds.yaml", Max: 4 * MiB}
	CA         = Kind{Name: "PEM CA bundle", Max: 4 * MiB}
	ImagesFile = Kind{Name: "images file (one ref per line)", Max: 4 * MiB}
	OSRelease  = Kind{Name: "os-release file", Max: 64 * kiB}
	Sysext     = Kind{Name: "sysext image", Max: 16 * giB}
	SysextRef  = Kind{Name: "sysext image", Max: 16 * giB, URLOK: true}
	Binaries   = Kind{Name: "directory of Kubernetes binaries", Dir: true}
	recordDir  = Kind{Name: "directory of build records", Dir: true}
)

// Describe says what a file of mode m is when it is not a regular file ("a named pipe (FIFO)");
// disk.CheckFileInfo and this package word their refusals with it.
func Describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a regular file"
}

// check refuses what st says path cannot be: what is the flag or argument ("--config", "FILE").
func check(what, path string, st fs.FileInfo, k Kind) error {
	m := st.Mode()
	switch {
	case m.IsDir() && (k.Dir || k.FileOrDir):
		return nil
	case k.Dir:
		return errs.Invalidf("%s %s is %s, not a %s: give the path of a directory", what, path, Describe(m), k.Name)
	case !m.IsRegular():
		return errs.Invalidf("%s %s is %s, not a %s: give the path of a regular file (a pipe or device is never read, as it may not end)", what, path, Describe(m), k.Name)
	case k.Max > 0 && st.Size() > k.Max:
		return errs.Invalidf("%s %s is %s, more than a %s can be (at most %s): is it the right file?", what, path, Size(st.Size()), k.Name, Size(k.Max))
	}
	return nil
}

// CheckPath is Check from a stat of path, for a path checked before any work starts. A path
// that does not exist passes: the command reports it where it reads it (some read it only
// when they get that far, some make it).
func CheckPath(what, path string, k Kind) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return statError(what, path, k, err)
	}
	return check(what, path, st, k)
}

// Open opens path for reading with Check on the path and again on the open descriptor.
func Open(what, path string, k Kind) (*os.File, fs.FileInfo, error) {
	return OpenChecked(path, os.O_RDONLY, func(st fs.FileInfo) error { return check(what, path, st, k) },
		func(err error) error { return statError(what, path, k, err) })
}

// OpenChecked is the open both this package and disk.OpenFile use: stat and check, open with
// O_NONBLOCK (a FIFO swapped in after the stat does not hang the open), fstat and check again.
// openErr words a failed stat or open.
func OpenChecked(path string, flag int, check func(fs.FileInfo) error, openErr func(error) error) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, openErr(err)
	}
	if err := check(st); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, openErr(err)
	}
	if st, err = f.Stat(); err == nil {
		err = check(st)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadFile reads a whole file of kind k named by what, never more than k.Max bytes (a file
// that grows after the check is still cut off).
func ReadFile(what, path string, k Kind) ([]byte, error) {
	f, _, err := Open(what, path, k)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := Read(what+" "+path, f, k)
	if err != nil && !errors.Is(err, errs.ErrInvalid) {
		return nil, fmt.Errorf("reading %s %s: %w", what, path, err)
	}
	return b, err
}

// Read reads r (standard input, an open file) to its end, at most k.Max bytes; what names it.
func Read(what string, r io.Reader, k Kind) ([]byte, error) {
	if k.Max <= 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, k.Max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > k.Max {
		return nil, errs.Invalidf("%s holds more than a %s can be (at most %s): is it the right file?", what, k.Name, Size(k.Max))
	}
	return b, nil
}

func statError(what, path string, k Kind, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return &missing{fmt.Sprintf("%s %s does not exist; give the path of a %s", what, path, k.Name)}
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}

// missing is a file that does not exist: a failure (exit 1) as the commands always answered
// it, and os.ErrNotExist for callers that treat an absent file as "none" (a build record).
type missing struct{ msg string }

func (m *missing) Error() string        { return m.msg }
func (m *missing) Is(target error) bool { return target == os.ErrNotExist }

// Size words n bytes for a message: "200 MiB", "4 KiB", "12 bytes".
func Size(n int64) string {
	switch {
	case n >= giB && n%giB == 0:
		return fmt.Sprintf("%d GiB", n/giB)
	case n >= MiB && n%MiB == 0:
		return fmt.Sprintf("%d MiB", n/MiB)
	case n >= kiB && n%kiB == 0 && n < MiB:
		return fmt.Sprintf("%d KiB", n/kiB)
	case n >= MiB:
		return fmt.Sprintf("%.1f MiB", float64(n)/MiB)
	case n >= kiB:
		return fmt.Sprintf("%.1f KiB", float64(n)/kiB)
	}
	return fmt.Sprintf("%d bytes", n)
}
