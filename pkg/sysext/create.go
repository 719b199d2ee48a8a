package sysext

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/squashfs"
	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
)

// Spec describes a sysext to write.
type Spec struct {
	// Name is NAME in extension-release.NAME; the image must be linked as /etc/extensions/NAME.raw.
	Name string
	// Release is the extension-release content; ReleaseOrder lists keys to write first.
	Release      Release
	ReleaseOrder []string
	Files        []File
	// Compression is "gzip" (default) or "zstd"; both are read by Flatcar's kernel. Through
	// go-diskfs, zstd is the slowest (it starts a new encoder for every 128 KiB block): on 204 MiB
	// of Go binaries gzip level 1 took 8 s, level 6 32 s, zstd 54 s, for 51%, 48% and 48%.
	Compression string
	// CompressionLevel is gzip's level, 1 (fastest) to 9; 0 means DefaultGzipLevel.
	CompressionLevel int
	// ModTime is every entry's mtime and the image's creation time. Zero: SOURCE_DATE_EPOCH
	// when set (reproducible images), else now.
	ModTime time.Time
}

// File is one entry of a sysext. Exactly one of Data, Source and Archive is set.
type File struct {
	Path   string      // inside the image, relative: usr/bin/kubelet
	Mode   fs.FileMode // permission bits; 0 means 0644 (0755 for archive members with an x bit)
	Data   []byte      // the content
	Source string      // or a file on this machine to copy
	// Archive is a .tar.gz: with Member, that one member becomes Path; without, every regular
	// file of the archive lands under the directory Path (its relative path kept).
	Archive string
	Member  string
}

// Compressions are the values Spec.Compression accepts, default first.
var Compressions = []string{"gzip", "zstd"}

// DefaultGzipLevel is the fastest: a sysext is made on every build, and level 6 saves 7% of the
// size for four times the time (scripts/bench/sysext-create.sh).
const DefaultGzipLevel = 1

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ValidName checks a sysext NAME (the file name in /etc/extensions without .raw).
func ValidName(name string) error {
	if !namePattern.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("invalid sysext name %q: use letters, digits, '.', '_' and '-' (e.g. kubernetes)", name)
	}
	return nil
}

// ReleasePath is where a sysext named name carries its extension-release.
func ReleasePath(name string) string {
	return "usr/lib/extension-release.d/extension-release." + name
}

// Create writes the sysext described by spec to out, atomically: out appears only when the
// image is complete and has been read back and validated. It returns what Open reports.
func Create(ctx context.Context, spec Spec, out string) (*Info, error) {
	comp, err := compressor(spec.Compression, spec.CompressionLevel)
	if err != nil {
		return nil, err
	}
	if err := spec.check(); err != nil {
		return nil, err
	}
	mtime, err := spec.modTime()
	if err != nil {
		return nil, err
	}
	tmp, err := atomicfile.Create(out)
	if err != nil {
		return nil, err
	}
	defer tmp.Abort()
	sq, err := squashfs.Create(file.New(tmp.File, false), 0, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the squashfs writer: %w", err)
	}
	// go-diskfs forgets its workspace once finalized, so remove it ourselves.
	ws := sq.Workspace()
	defer os.RemoveAll(ws)
	if err := stage(ctx, ws, spec, mtime); err != nil {
		return nil, err
	}
	if err := finalize(ctx, sq, comp); err != nil {
		return nil, err
	}
	if err := setMkfsTime(tmp.File, mtime); err != nil {
		return nil, err
	}
	if err := padTo4K(tmp.File); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", out, err)
	}
	info, err := Open(tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("the image just written does not read back (a go-diskfs writer bug?): %w", err)
	}
	if err := info.Validate(spec.Name); err != nil {
		return nil, err
	}
	if err := tmp.Commit(0o644); err != nil {
		return nil, err
	}
	info.Path = out
	return info, nil
}

func compressor(name string, level int) (squashfs.Compressor, error) {
	switch name {
	case "zstd":
		if level != 0 {
			return nil, fmt.Errorf("zstd takes no compression level here (go-diskfs' zstd writer always uses its default); levels are for gzip")
		}
		return &squashfs.CompressorZstd{}, nil
	case "", "gzip":
		if level == 0 {
			level = DefaultGzipLevel
		}
		if level < 1 || level > 9 {
			return nil, fmt.Errorf("gzip compression level %d: use 1 (fastest) to 9 (smallest)", level)
		}
		// go-diskfs leaves data uncompressed unless the level is set.
		return &squashfs.CompressorGzip{CompressionLevel: uint32(level)}, nil
	}
	return nil, fmt.Errorf("compression %q is not supported: use gzip or zstd (go-diskfs' xz and lz4 images are rejected by the kernel)", name)
}

func (s Spec) check() error {
	if err := ValidName(s.Name); err != nil {
		return err
	}
	if len(s.Release) == 0 {
		return errors.New("the extension-release content is empty")
	}
	seen := map[string]bool{}
	for _, f := range s.Files {
		p := path.Clean(f.Path)
		switch {
		case f.Path == "" || path.IsAbs(f.Path) || p == "." || strings.HasPrefix(p, "../"):
			return fmt.Errorf("invalid path %q in the sysext: use a relative path such as usr/bin/kubelet", f.Path)
		case p == "usr/lib/os-release" || p == "etc/os-release":
			return fmt.Errorf("%s must not be in a sysext: systemd-sysext refuses images that carry an os-release", p)
		case strings.HasPrefix(p, "usr/lib/extension-release.d/"):
			return fmt.Errorf("%s: the extension-release file is written from Spec.Release", p)
		case seen[p]:
			return fmt.Errorf("%s is listed twice", p)
		}
		seen[p] = true
		n := 0
		for _, set := range []bool{f.Data != nil, f.Source != "", f.Archive != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: set exactly one of Data, Source and Archive", p)
		}
	}
	return nil
}

func (s Spec) modTime() (time.Time, error) {
	if !s.ModTime.IsZero() {
		return s.ModTime, nil
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec < 0 || sec > 1<<32-1 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a Unix time in seconds", v)
		}
		return time.Unix(sec, 0), nil
	}
	return time.Now().Truncate(time.Second), nil
}

// finalize runs go-diskfs' Finalize, turning its panics (seen on xattrs) into errors, and
// gives up waiting when ctx is cancelled (the caller then removes the temp file).
func finalize(ctx context.Context, sq *squashfs.FileSystem, comp squashfs.Compressor) error {
	root := uint32(0)
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("go-diskfs squashfs writer failed: %v", r)
			}
		}()
		done <- sq.Finalize(squashfs.FinalizeOptions{Compression: comp, FileUID: &root, FileGID: &root})
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("writing the squashfs image: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setMkfsTime replaces go-diskfs' time.Now() in the superblock so that the same inputs and
// SOURCE_DATE_EPOCH give the same bytes.
func setMkfsTime(f *os.File, t time.Time) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(t.Unix()))
	if _, err := f.WriteAt(b[:], 8); err != nil {
		return fmt.Errorf("setting the squashfs creation time: %w", err)
	}
	return nil
}

// padTo4K pads the image to a multiple of 4 KiB as mksquashfs does: go-diskfs does not, and a
// loop device (how systemd-sysext mounts an image) ends at the last whole 512-byte sector, so
// an unpadded image's tail is cut off and the kernel refuses to mount it.
func padTo4K(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if rem := fi.Size() % 4096; rem != 0 {
		if err := f.Truncate(fi.Size() + 4096 - rem); err != nil {
			return fmt.Errorf("padding the squashfs image: %w", err)
		}
	}
	return nil
}

// clearXattrs removes extended attributes that the staging filesystem may have added (SELinux
// labels, for example): go-diskfs panics on them, and a sysext should carry none.
func clearXattrs(p string) error {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if err := unix.Lremovexattr(p, name); err != nil {
			return fmt.Errorf("removing xattr %s from the staged %s: %w", name, filepath.Base(p), err)
		}
	}
	return nil
}
