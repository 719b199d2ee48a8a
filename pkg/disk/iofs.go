package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/diskfs/go-diskfs/filesystem/squashfs"

	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fsfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// FS as io/fs: fs.FS, fs.ReadDirFS, fs.ReadFileFS, fs.StatFS and fs.ReadLinkFS, with io/fs
// names. go-diskfs' own answers are mended here: its Stat does not follow symbolic links (Lstat
// is that; Stat and Open follow them, as os.DirFS does), a missing path is not always
// fs.ErrNotExist, and its ext4 File.Read panics on some offsets (regular files are read through
// alignedReader).

// Type names the filesystem: "ext4", "FAT" or "squashfs".
func (f *FS) Type() string { return f.kind }

// maxLinks bounds a symlink chain, as the kernel's 40.
const maxLinks = 40

// checkName refuses what io/fs does not call a name ("/etc/x", "a//b", "..", ""), and on FAT a
// backslash, which its drivers take as a separator.
func (f *FS) checkName(op, name string) error {
	if !fs.ValidPath(name) || f.kind == "FAT" && strings.Contains(name, `\`) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

// Lstat describes name itself (a symbolic link is not followed).
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.checkName("lstat", name); err != nil {
		return nil, err
	}
	return f.lstat(name)
}

func (f *FS) lstat(name string) (fs.FileInfo, error) {
	fi, err := guarded(f, func() (fs.FileInfo, error) { return f.fs.Stat(name) })
	if err != nil {
		return nil, f.pathError("stat", name, err)
	}
	if fi.IsDir() && !fi.Mode().IsDir() { // go-diskfs' FAT
		fi = dirInfo{fi}
	}
	return fi, nil
}

// dirInfo adds fs.ModeDir to a directory's mode.
type dirInfo struct{ fs.FileInfo }

func (d dirInfo) Mode() fs.FileMode { return d.FileInfo.Mode() | fs.ModeDir }

// Stat describes name, following symbolic links.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.checkName("stat", name); err != nil {
		return nil, err
	}
	_, fi, err := f.follow("stat", name)
	return fi, err
}

// follow resolves name's symbolic links (inside this filesystem: an absolute target is taken
// from its root) and returns the final name and its metadata under name's own base name.
func (f *FS) follow(op, name string) (string, fs.FileInfo, error) {
	p := name
	for range maxLinks {
		fi, err := f.lstat(p)
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, named{fi, path.Base(name)}, nil
		}
		target, err := f.readLink(p)
		if err != nil {
			return "", nil, err
		}
		if !path.IsAbs(target) {
			target = path.Join("/", path.Dir(p), target)
		}
		p = FSName(target)
	}
	return "", nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("more than %d levels of symbolic links", maxLinks)}
}

// named is a FileInfo under another name (a symbolic link's, for its target).
type named struct {
	fs.FileInfo
	name string
}

func (n named) Name() string { return n.name }

// ReadLink returns a symbolic link's target.
func (f *FS) ReadLink(name string) (string, error) {
	if err := f.checkName("readlink", name); err != nil {
		return "", err
	}
	return f.readLink(name)
}

func (f *FS) readLink(name string) (target string, err error) {
	defer f.guard(&err)
	if e, ok := f.fs.(*ext4.FileSystem); ok {
		if target, err = e.ReadLink(name); err != nil {
			return "", f.pathError("readlink", name, err)
		}
		return target, nil
	}
	fi, err := f.lstat(name)
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*squashfs.StatT); ok && fi.Mode()&fs.ModeSymlink != 0 {
		return st.LinkTarget, nil
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.New("not a symbolic link")}
}

// ReadDir lists a directory (following a symbolic link to it), sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.checkName("readdir", name); err != nil {
		return nil, err
	}
	p, _, err := f.follow("readdir", name)
	if err != nil {
		return nil, err
	}
	return f.readDir(p)
}

func (f *FS) readDir(name string) ([]fs.DirEntry, error) {
	ents, err := guarded(f, func() ([]fs.DirEntry, error) { return f.fs.ReadDir(name) })
	if err != nil {
		return nil, f.pathError("readdir", name, err)
	}
	ents = slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return e.Name() == "." || e.Name() == ".." })
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for i, e := range ents {
		ents[i] = dirEntry{e, f, path.Join(name, e.Name())}
	}
	return ents, nil
}

// dirEntry takes its Info from Lstat: go-diskfs' ext4 entries leave the permission bits out.
type dirEntry struct {
	fs.DirEntry
	fs   *FS
	path string
}

func (e dirEntry) Info() (fs.FileInfo, error) { return e.fs.lstat(e.path) }

// pathError is err as an *fs.PathError, wrapping fs.ErrNotExist when name is not there (which
// go-diskfs says in words of its own): name's parent is listed to tell.
func (f *FS) pathError(op, name string, err error) error {
	var pe *fs.PathError
	var ce corruptError
	if errors.As(err, &pe) || errors.As(err, &ce) {
		return err
	}
	if !errors.Is(err, fs.ErrNotExist) && f.missing(name) {
		err = fmt.Errorf("%w (%v)", fs.ErrNotExist, err)
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// missing says whether name, or a directory on its way, is absent from its parent's listing.
func (f *FS) missing(name string) bool {
	if name == "." {
		return false
	}
	parent := path.Dir(name)
	ents, err := guarded(f, func() ([]fs.DirEntry, error) { return f.fs.ReadDir(parent) })
	if err != nil {
		return f.missing(parent)
	}
	return !slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == path.Base(name) })
}

// ReadFile reads a whole file.
func (f *FS) ReadFile(name string) ([]byte, error) {
	h, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return io.ReadAll(h)
}

// Open opens a directory (an fs.ReadDirFile) or a regular file (Read, Seek, ReadAt), read-only.
func (f *FS) Open(name string) (fs.File, error) {
	if err := f.checkName("open", name); err != nil {
		return nil, err
	}
	p, fi, err := f.follow("open", name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return &fsfile.Dir{Name: p, Info: fi, List: func() ([]fs.DirEntry, error) { return f.readDir(p) }}, nil
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errors.New("not a regular file or a directory")}
	}
	h, err := f.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return nil, f.pathError("open", p, err)
	}
	ra := &alignedReader{rs: h.(io.ReadSeeker), size: fi.Size()}
	return &fsfile.File{SectionReader: io.NewSectionReader(ra, 0, fi.Size()), Info: fi}, nil
}

// ReaderAt opens a regular file for random access (following symbolic links).
func (f *FS) ReaderAt(name string) (io.ReaderAt, int64, error) {
	h, err := f.Open(name)
	if err != nil {
		return nil, 0, err
	}
	r, ok := h.(*fsfile.File)
	if !ok {
		return nil, 0, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a regular file")}
	}
	return r.SectionReader, r.Size(), nil
}

// WriteFile replaces (or creates) a small file in place: the OEM edit (ext4). go-diskfs'
// OpenFile ignores O_TRUNC and a Remove then re-create corrupts the filesystem, so a shorter
// file is written over and then truncated.
func (f *FS) WriteFile(name string, data []byte) error {
	if err := f.checkName("write", name); err != nil {
		return err
	}
	if _, err := f.ext4(); err != nil {
		return err
	}
	flag := os.O_RDWR
	if _, err := f.lstat(name); errors.Is(err, fs.ErrNotExist) {
		flag |= os.O_CREATE
	} else if err != nil {
		return err
	}
	h, err := f.OpenFile(name, flag)
	if err != nil {
		return fmt.Errorf("ext4: cannot open %s for writing: %v", name, err)
	}
	if _, err := h.Write(data); err != nil {
		h.Close()
		return fmt.Errorf("ext4: writing %s: %v", name, err)
	}
	if err := h.Close(); err != nil {
		return fmt.Errorf("ext4: closing %s: %v", name, err)
	}
	return f.Truncate(name, int64(len(data)))
}

// alignedReader reads a go-diskfs file at random offsets. go-diskfs v1.9.4's ext4 File.Read
// panics (negative makeslice) when a read starts inside the first block after the end of an
// extent, other than at that block's start: it skips only extents ending before that block.
// Reads here always start on a 4 KiB boundary (the block is read whole and trimmed), which
// that code handles, so a squashfs inside ROOT can be read in place.
type alignedReader struct {
	mu   sync.Mutex
	rs   io.ReadSeeker
	size int64
}

const alignBlock = 4096

func (a *alignedReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= a.size {
		return 0, io.EOF
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	start := off / alignBlock * alignBlock
	end := min(off+int64(len(p)), a.size)
	if _, err := a.rs.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	buf := make([]byte, end-start)
	if _, err := io.ReadFull(a.rs, buf); err != nil {
		return 0, err
	}
	n := copy(p, buf[off-start:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// ReadFS is every filesystem flatcar-capo reads in an image (ext4, FAT and squashfs through
// go-diskfs, btrfs through pkg/btrfs), in io/fs's shape.
type ReadFS interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
	Type() string // "btrfs", "ext4", "FAT" or "squashfs"
}

// WritableFS adds the one edit made in place, the OEM step's: WriteFile replaces (or creates) a
// small file. It fails on a read-only device and on FAT and squashfs.
type WritableFS interface {
	ReadFS
	WriteFile(name string, data []byte) error
}

// ErrUnknownFS means a partition holds none of the filesystems OpenFS reads.
var ErrUnknownFS = errors.New("unknown filesystem")

// DetectFS names the filesystem on dev from its superblock magic: btrfs at 64 KiB + 0x40,
// ext2/3/4 at 1 KiB + 0x38, squashfs at 0, FAT's boot sector signature and type string. Flatcar's
// OEM switched from ext4 to btrfs in 2983.x, so the version alone does not tell. A read failure
// (a corrupt qcow2 cluster, an I/O error) is returned as such, not as ErrUnknownFS.
func DetectFS(dev io.ReaderAt) (string, error) {
	var b [8]byte
	n, err := dev.ReadAt(b[:], 0x10000+0x40)
	if n == 8 && string(b[:]) == "_BHRfS_M" {
		return "btrfs", nil
	}
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the btrfs superblock: %w", err)
	}
	n, err = dev.ReadAt(b[:2], 0x400+0x38)
	if n == 2 && binary.LittleEndian.Uint16(b[:2]) == 0xEF53 {
		return "ext4", nil
	}
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the ext4 superblock: %w", err)
	}
	var bs [512]byte
	n, err = dev.ReadAt(bs[:], 0)
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the first sector: %w", err)
	}
	switch {
	case n >= 4 && string(bs[:4]) == "hsqs":
		return "squashfs", nil
	case n == 512 && bs[510] == 0x55 && bs[511] == 0xAA && (string(bs[0x36:0x39]) == "FAT" || string(bs[0x52:0x55]) == "FAT"):
		return "FAT", nil
	}
	return "", ErrUnknownFS
}

// OpenFS opens the filesystem on dev (a partition), whichever DetectFS finds; name names it in
// errors ("partition 6 (OEM)"). A read-only dev makes WriteFile fail.
func OpenFS(dev vdisk.Disk, name string) (WritableFS, error) {
	kind, err := DetectFS(dev)
	switch {
	case errors.Is(err, ErrUnknownFS):
		return nil, fmt.Errorf("%s has an %w (no btrfs, ext4, squashfs or FAT superblock)", name, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch kind {
	case "btrfs":
		f, err := btrfs.Open(dev, dev.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	case "ext4":
		return OpenExt4(dev, name)
	case "FAT":
		return OpenFAT(dev, name)
	}
	var sb [16]byte
	if _, err := dev.ReadAt(sb[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading the squashfs superblock: %w", name, err)
	}
	return OpenSquashfs(dev, dev.Size(), int64(binary.LittleEndian.Uint32(sb[12:])), name)
}
