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
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// stage fills the go-diskfs workspace ws with spec's files: every entry written by us, so its
// owner (forced to root at Finalize), mode, mtime and lack of xattrs are under our control.
func stage(ctx context.Context, ws string, spec Spec, mtime time.Time) error {
	st := stager{ws: ws, dirs: map[string]bool{}}
	for _, f := range spec.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.add(f); err != nil {
			return err
		}
	}
	rel := spec.Release.Format(spec.ReleaseOrder...)
	if err := st.write(ReleasePath(spec.Name), 0o644, strings.NewReader(string(rel))); err != nil {
		return err
	}
	return st.finish(mtime)
}

type stager struct {
	ws    string
	dirs  map[string]bool
	files []string
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
	if err := s.mkdirs(path.Dir(p)); err != nil {
		return err
	}
	dst := filepath.Join(s.ws, filepath.FromSlash(p))
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s is given twice", p)
		}
		return fmt.Errorf("staging %s: %w", p, err)
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode)
	}
	if err != nil {
		return fmt.Errorf("staging %s: %w", p, err)
	}
	s.files = append(s.files, dst)
	return nil
}

func (s *stager) mkdirs(dir string) error {
	if dir == "." || s.dirs[dir] {
		return nil
	}
	if err := s.mkdirs(path.Dir(dir)); err != nil {
		return err
	}
	p := filepath.Join(s.ws, filepath.FromSlash(dir))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("staging %s/: %w", dir, err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is both a file and a directory in the sysext", dir)
	}
	s.dirs[dir] = true
	return nil
}

// finish sets modes, mtimes and (no) xattrs on every staged entry, deepest first so that
// setting a child's time does not change its parent's afterwards.
func (s *stager) finish(mtime time.Time) error {
	dirs := make([]string, 0, len(s.dirs)+1)
	for d := range s.dirs {
		dirs = append(dirs, filepath.Join(s.ws, filepath.FromSlash(d)))
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	dirs = append(dirs, s.ws)
	for _, p := range append(append([]string{}, s.files...), dirs...) {
		if err := clearXattrs(p); err != nil {
			return fmt.Errorf("staging for the squashfs: %w", err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}
