package sysext

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/squashfs"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Spec describes a sysext to write.
type Spec struct {
	// Name is NAME in extension-release.NAME; the image must be linked as /etc/extensions/NAME.raw.
	Name string
	// Release is the extension-release content; ReleaseOrder lists keys to write first.
	Release      Release
	ReleaseOrder []string
	Files        []File
	// Compression is "gzip" (default) or "zstd" (level 3); both are read by Flatcar's kernel.
	// pkg/squashfs compresses the data blocks on every core (scripts/bench/sysext-create.sh).
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

// DefaultGzipLevel is the fastest: a sysext is made on every build, and level 6 saves 7% of the
// size for four times the time (scripts/bench/sysext-create.sh).
const DefaultGzipLevel = 1

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// validName checks a sysext NAME (the file name in /etc/extensions without .raw).
func validName(name string) error {
	if !namePattern.MatchString(name) || strings.Contains(name, "..") {
		return errs.Invalidf("invalid sysext name %q: use letters, digits, '.', '_' and '-' (e.g. kubernetes)", name)
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
	comp, level, err := compressor(spec.Compression, spec.CompressionLevel)
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
	w, err := squashfs.NewWriter(tmp.File, squashfs.Options{Compression: comp, Level: level, ModTime: mtime})
	if err != nil {
		return nil, err
	}
	if err := stage(ctx, w, spec); err != nil {
		w.Abort()
		return nil, err
	}
	if _, _, err := w.Close(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", out, err)
	}
	info, err := Open(tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("the image just written does not read back (a squashfs writer bug?): %w", err)
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

// zstdLevel is zstd's default level, which mksquashfs and go-diskfs' writer also used.
const zstdLevel = 3

// compressor is the squashfs compression and its level.
func compressor(name string, level int) (string, int, error) {
	switch name {
	case "zstd":
		if level != 0 {
			return "", 0, fmt.Errorf("zstd takes no compression level here (it always uses level %d); levels are for gzip", zstdLevel)
		}
		return "zstd", zstdLevel, nil
	case "", "gzip":
		if level == 0 {
			level = DefaultGzipLevel
		}
		if level < 1 || level > 9 {
			return "", 0, fmt.Errorf("gzip compression level %d: use 1 (fastest) to 9 (smallest)", level)
		}
		return "gzip", level, nil
	}
	return "", 0, fmt.Errorf("compression %q is not supported: use gzip or zstd (both read by Flatcar's kernel)", name)
}

func (s Spec) check() error {
	if err := validName(s.Name); err != nil {
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
