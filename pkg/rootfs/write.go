package rootfs

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// chunk is the write size for file content: go-diskfs copies each Write, so this bounds memory.
const chunk = 1 << 20

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// populate writes root's metadata and entries (sorted, parents first) into a fresh filesystem:
// names first so directories grow compactly, then file contents, then ownership, modes and
// times, directories last and deepest first so writing into them does not change them again.
// It returns the sha256 of each regular file's content as written.
func populate(ctx context.Context, nfs *disk.FS, root Entry, entries []Entry) (map[string][sha256.Size]byte, error) {
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := e.Path
		switch {
		case e.IsDir():
			if err := nfs.Mkdir(p); err != nil {
				return nil, fmt.Errorf("creating directory /%s: %w", p, err)
			}
		case e.IsSymlink():
			// go-diskfs gives a new symlink its parent's owner, and its Chown follows links: own
			// the parent as the link's owner for the moment (the parent's own owner is set below).
			if err := nfs.Chown(parentOf(p), int(e.UID), int(e.GID)); err != nil {
				return nil, fmt.Errorf("preparing the owner of symlink /%s: %w", p, err)
			}
			if err := nfs.Symlink(e.Target, p); err != nil {
				return nil, fmt.Errorf("creating symlink /%s: %w", p, err)
			}
		default:
			f, err := nfs.OpenFile(p, os.O_CREATE|os.O_RDWR)
			if err != nil {
				return nil, fmt.Errorf("creating /%s: %w", p, err)
			}
			f.Close()
		}
	}
	sums := map[string][sha256.Size]byte{}
	buf := make([]byte, chunk)
	for _, e := range entries {
		if !e.IsRegular() || e.Size == 0 {
			continue
		}
		sum, err := writeContent(ctx, nfs, e, buf)
		if err != nil {
			return nil, err
		}
		sums[e.Path] = sum
	}
	for _, e := range entries {
		if !e.IsDir() {
			if err := setMeta(nfs, e); err != nil {
				return nil, err
			}
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].IsDir() {
			if err := setMeta(nfs, entries[i]); err != nil {
				return nil, err
			}
		}
	}
	return sums, setMeta(nfs, root)
}

func writeContent(ctx context.Context, nfs *disk.FS, e Entry, buf []byte) (sum [sha256.Size]byte, err error) {
	src, err := e.Open()
	if err != nil {
		return sum, err
	}
	defer src.Close()
	dst, err := nfs.OpenFile(e.Path, os.O_RDWR)
	if err != nil {
		return sum, fmt.Errorf("opening /%s in the new ROOT: %w", e.Path, err)
	}
	defer dst.Close()
	h := sha256.New()
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			if written+int64(n) > e.Size {
				return sum, fmt.Errorf("/%s grew beyond %d bytes while it was copied", e.Path, e.Size)
			}
			h.Write(buf[:n])
			w, err := dst.Write(buf[:n])
			if err == nil && w != n {
				err = io.ErrShortWrite
			}
			if err != nil {
				return sum, fmt.Errorf("writing /%s in the new ROOT: %w", e.Path, err)
			}
			written += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return sum, fmt.Errorf("reading the content of /%s: %w", e.Path, rerr)
		}
	}
	if written != e.Size {
		return sum, fmt.Errorf("/%s has %d bytes, expected %d (did it change while it was copied?)", e.Path, written, e.Size)
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// setMeta sets mode, owner and times; a symlink's owner was set when it was made, and its mode
// is always 0777 (go-diskfs's Chmod and Chown would follow it).
func setMeta(nfs *disk.FS, e Entry) error {
	p := e.Path // "" is the root: disk.FS takes it as "."
	if !e.IsSymlink() {
		if err := nfs.Chmod(p, e.Mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return fmt.Errorf("setting the mode of /%s: %w", e.Path, err)
		}
		if err := nfs.Chown(p, int(e.UID), int(e.GID)); err != nil {
			return fmt.Errorf("setting the owner of /%s: %w", e.Path, err)
		}
	}
	t := e.ModTime
	if err := nfs.Chtimes(p, t, t, t); err != nil {
		return fmt.Errorf("setting the times of /%s: %w", e.Path, err)
	}
	return nil
}

// verify reads the new filesystem back and compares every entry with what was meant: type,
// mode, owner, mtime (seconds), size, symlink target and content hash. It is the proof, at run
// time, that go-diskfs wrote what it was asked to.
func verify(nfs *disk.FS, root Entry, entries []Entry, sums map[string][sha256.Size]byte) error {
	want := map[string]Entry{}
	for _, e := range entries {
		want[e.Path] = e
	}
	if err := verifyEntry(nfs, root, sums); err != nil {
		return err
	}
	seen := 0
	err := fs.WalkDir(nfs, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		e, ok := want[p]
		if !ok {
			return fmt.Errorf("/%s is in the new ROOT but was not asked for", p)
		}
		seen++
		return verifyEntry(nfs, e, sums)
	})
	if err != nil {
		return fmt.Errorf("verifying the new ROOT: %w", err)
	}
	if seen != len(entries) {
		missing := []string{}
		for p := range want {
			if _, err := nfs.Lstat(p); err != nil {
				missing = append(missing, "/"+p)
			}
		}
		sort.Strings(missing)
		return fmt.Errorf("verifying the new ROOT: %d of %d entries found; missing: %s", seen, len(entries), strings.Join(missing, ", "))
	}
	return nil
}

func verifyEntry(nfs *disk.FS, e Entry, sums map[string][sha256.Size]byte) error {
	got, _, err := statEntry(nfs, e.Path)
	if err != nil {
		return err
	}
	typeMask := fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if e.IsSymlink() {
		typeMask = fs.ModeType
	}
	var diffs []string
	if got.Mode&typeMask != e.Mode&typeMask {
		diffs = append(diffs, fmt.Sprintf("mode %v, want %v", got.Mode, e.Mode))
	}
	if got.UID != e.UID || got.GID != e.GID {
		diffs = append(diffs, fmt.Sprintf("owner %d:%d, want %d:%d", got.UID, got.GID, e.UID, e.GID))
	}
	if got.ModTime.Unix() != e.ModTime.Unix() {
		diffs = append(diffs, fmt.Sprintf("mtime %v, want %v", got.ModTime.UTC(), e.ModTime.UTC()))
	}
	if e.IsSymlink() && got.Target != e.Target {
		diffs = append(diffs, fmt.Sprintf("target %q, want %q", got.Target, e.Target))
	}
	if e.IsRegular() {
		if got.Size != e.Size {
			diffs = append(diffs, fmt.Sprintf("size %d, want %d", got.Size, e.Size))
		} else if e.Size > 0 {
			sum, err := hashFile(nfs, e.Path)
			if err != nil {
				return err
			}
			if sum != sums[e.Path] {
				diffs = append(diffs, "content differs from what was written")
			}
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("verifying the new ROOT: /%s: %s", e.Path, strings.Join(diffs, "; "))
	}
	return nil
}

func hashFile(nfs *disk.FS, p string) (sum [sha256.Size]byte, err error) {
	f, err := nfs.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return sum, fmt.Errorf("verifying /%s: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, chunk)); err != nil {
		return sum, fmt.Errorf("verifying /%s: %w", p, err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
