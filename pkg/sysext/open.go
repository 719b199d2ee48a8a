package sysext

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/squashfs"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// Info is what a sysext file holds, as Open reads it.
type Info struct {
	Path        string    `json:"path"`
	Size        int64     `json:"size"`
	Compression string    `json:"compression"`
	BlockSize   uint32    `json:"blockSize"`
	Created     time.Time `json:"created"`
	// BytesUsed is the image's length per its superblock; the file may be longer (padding).
	BytesUsed int64 `json:"bytesUsed"`
	// ReleaseNames are the NAMEs of every usr/lib/extension-release.d/extension-release.NAME.
	ReleaseNames []string `json:"releaseNames"`
	// Releases holds their parsed content, by NAME (nil when a file does not parse).
	Releases map[string]Release `json:"releases"`
	// ReleaseErrors holds parse errors, by NAME.
	ReleaseErrors map[string]string `json:"releaseErrors,omitempty"`
	HasOSRelease  bool              `json:"hasOsRelease"`
	Files         []Entry           `json:"files"`
	// Bytes is the total size of the regular files (uncompressed).
	Bytes int64 `json:"bytes"`
	src   io.ReaderAt
}

// Entry is one file, directory or link in the image.
type Entry struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"` // ls-style, e.g. -rwxr-xr-x
	Size   int64  `json:"size"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	Target string `json:"target,omitempty"`
	perm   fs.FileMode
}

// Limits that keep a hostile or corrupt image from exhausting memory while it is listed.
const (
	maxEntries     = 200000
	maxReleaseSize = 64 << 10
)

// Open reads a sysext's superblock, file list and extension-release files. A truncated or
// corrupt image is an error saying so; Open does not decompress file data (Verify does).
func Open(p string) (*Info, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	info, err := Read(f, fi.Size(), p)
	if info != nil {
		info.src = nil // f is closed on return; Verify opens Path again
	}
	return info, err
}

// Read is Open for an image that is not a file of its own (e.g. inside a disk image's
// filesystem); label names it in messages and Info.Path. r must stay readable while Info.Verify
// may be called.
func Read(r io.ReaderAt, size int64, label string) (info *Info, err error) {
	sb, err := readSuperblock(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	info = &Info{Path: label, Size: size, Compression: sb.Compression, BlockSize: sb.BlockSize, Created: sb.MkfsTime, BytesUsed: int64(sb.BytesUsed),
		ReleaseNames: []string{}, Releases: map[string]Release{}, src: r}
	err = func() error {
		sq, err := disk.OpenSquashfs(r, int64(sb.BytesUsed), int64(sb.BlockSize), "")
		if err != nil {
			return err
		}
		if err := info.walk(sq, "."); err != nil {
			return err
		}
		return info.readReleases(sq)
	}()
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt squashfs image: %w", label, err)
	}
	return info, nil
}

func (info *Info) walk(sq *disk.FS, dir string) error {
	entries, err := sq.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing /%s: %w", strings.TrimPrefix(dir, "."), err)
	}
	for _, de := range entries {
		if len(info.Files) >= maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		name := de.Name()
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return fmt.Errorf("invalid entry name %q in /%s", name, dir)
		}
		p := path.Join(dir, name)
		fi, err := de.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: p, Mode: fi.Mode().String(), perm: fi.Mode()}
		if fi.Mode().IsRegular() {
			e.Size = fi.Size()
			info.Bytes += e.Size
		}
		if st, ok := fi.Sys().(*squashfs.StatT); ok && st != nil {
			e.UID, e.GID, e.Target = st.UID, st.GID, st.LinkTarget
		}
		info.Files = append(info.Files, e)
		if fi.IsDir() {
			if err := info.walk(sq, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (info *Info) readReleases(sq *disk.FS) error {
	const dir = "usr/lib/extension-release.d/"
	for _, e := range info.Files {
		switch {
		case e.Path == "usr/lib/os-release":
			info.HasOSRelease = true
		case strings.HasPrefix(e.Path, dir+"extension-release.") && !strings.Contains(strings.TrimPrefix(e.Path, dir), "/"):
			name := strings.TrimPrefix(e.Path, dir+"extension-release.")
			info.ReleaseNames = append(info.ReleaseNames, name)
			if !e.perm.IsRegular() || e.Size > maxReleaseSize {
				info.setReleaseError(name, "not a regular file of at most 64 KiB")
				continue
			}
			data, err := sq.ReadFile(e.Path)
			if err != nil {
				return fmt.Errorf("reading %s: %w", e.Path, err)
			}
			r, err := parseRelease(data)
			if err != nil {
				info.setReleaseError(name, err.Error())
				continue
			}
			info.Releases[name] = r
		}
	}
	sort.Strings(info.ReleaseNames)
	return nil
}

func (info *Info) setReleaseError(name, msg string) {
	if info.ReleaseErrors == nil {
		info.ReleaseErrors = map[string]string{}
	}
	info.ReleaseErrors[name] = msg
}

// Verify decompresses every regular file's data, so a corrupt data block is found before the
// image is used; Open reads metadata only.
func (info *Info) Verify() error {
	src := info.src
	if src == nil {
		f, err := os.Open(info.Path)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	err := func() error {
		sq, err := disk.OpenSquashfs(src, info.Size, int64(info.BlockSize), "")
		if err != nil {
			return err
		}
		buf := make([]byte, 1<<20)
		for _, e := range info.Files {
			if !e.perm.IsRegular() {
				continue
			}
			n, err := func() (int64, error) {
				f, err := sq.OpenFile(e.Path, os.O_RDONLY)
				if err != nil {
					return 0, err
				}
				defer f.Close()
				return io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
			}()
			if err != nil {
				return fmt.Errorf("/%s: %w", e.Path, err)
			}
			if n != e.Size {
				return fmt.Errorf("/%s: read %d bytes, the inode says %d", e.Path, n, e.Size)
			}
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("%s: corrupt squashfs data: %w", info.Path, err)
	}
	return nil
}

// Entry returns the entry at p (relative, e.g. usr/bin/kubelet).
func (info *Info) Entry(p string) (Entry, bool) {
	for _, e := range info.Files {
		if e.Path == p {
			return e, true
		}
	}
	return Entry{}, false
}

// ReadFile returns the content of the regular file p (e.g. usr/bin/kubeadm) of the sysext image
// at image, at most max bytes (the build reads kubeadm from a --sysext to list its images).
func ReadFile(image, p string, max int64) (data []byte, err error) {
	info, err := Open(image)
	if err != nil {
		return nil, err
	}
	e, ok := info.Entry(p)
	if !ok || !e.perm.IsRegular() {
		return nil, fmt.Errorf("%s has no file %s", image, p)
	}
	if e.Size > max {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes", image, p, max)
	}
	f, err := os.Open(image)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sq, err := disk.OpenSquashfs(f, info.BytesUsed, int64(info.BlockSize), "")
	if err == nil {
		data, err = sq.ReadFile(p)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", image, p, err)
	}
	return data, nil
}
