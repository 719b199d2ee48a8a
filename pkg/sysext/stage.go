package sysext

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/squashfs"
)

// stage writes spec's files into the squashfs writer, in the order given (which is the data's
// order in the image), then the extension-release. Every entry is root-owned, with the mode
// given and w's mtime; parent directories are 0755.
func stage(ctx context.Context, w *squashfs.Writer, spec Spec) error {
	st := stager{w: w, ctx: ctx}
	for _, f := range spec.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.add(f); err != nil {
			return err
		}
	}
	rel := spec.Release.Format(spec.ReleaseOrder...)
	return st.write(ReleasePath(spec.Name), 0o644, strings.NewReader(string(rel)))
}

type stager struct {
	w   *squashfs.Writer
	ctx context.Context
}

func (s *stager) add(f File) error {
	mode := f.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	p := path.Clean(f.Path)
	switch {
	case f.Data != nil:
		return s.write(p, mode, strings.NewReader(string(f.Data)))
	case f.Source != "":
		src, err := os.Open(f.Source)
		if err != nil {
			return fmt.Errorf("%s for %s: %w", f.Source, p, err)
		}
		defer src.Close()
		if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%s for %s is not a regular file", f.Source, p)
		}
		return s.write(p, mode, src)
	default:
		return s.addArchive(f, p)
	}
}

// addArchive extracts a .tar.gz: one member (f.Member) to p, or every regular file under p.
func (s *stager) addArchive(f File, p string) error {
	a, err := os.Open(f.Archive)
	if err != nil {
		return fmt.Errorf("%s for %s: %w", f.Archive, p, err)
	}
	defer a.Close()
	gz, err := gzip.NewReader(a)
	if err != nil {
		return fmt.Errorf("%s is not a .tar.gz: %w", f.Archive, err)
	}
	tr := tar.NewReader(gz)
	found := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", f.Archive, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if h.Typeflag == tar.TypeDir || name == "." {
			continue
		}
		if f.Member != "" && name != f.Member {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s: member %s is not a regular file (links are not supported in a sysext made by flatcar-capo)", f.Archive, h.Name)
		}
		if path.IsAbs(name) || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%s: member %s escapes the archive", f.Archive, h.Name)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
		}
		dest := path.Join(p, name)
		if f.Member != "" {
			dest = p
		}
		if err := s.write(dest, mode, tr); err != nil {
			return err
		}
		found++
	}
	switch {
	case f.Member != "" && found == 0:
		return fmt.Errorf("%s has no member %s", f.Archive, f.Member)
	case found == 0:
		return fmt.Errorf("%s holds no files", f.Archive)
	}
	return nil
}

func (s *stager) write(p string, mode fs.FileMode, r io.Reader) error {
	return s.w.Create(p, mode, ctxReader{s.ctx, r})
}

// ctxReader stops a long copy when the build is interrupted.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
