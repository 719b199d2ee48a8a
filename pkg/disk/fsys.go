package disk

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/filesystem/squashfs"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// FS is the one way into go-diskfs' ext4, FAT and squashfs drivers. Those panic on some corrupt
// metadata (index out of range, division by zero) and allocate whatever a crafted superblock
// asks for, and an image is untrusted input: every method here runs behind recover, and
// OpenExt4 checks the superblock's sizes first, so a crafted image is an error naming Name
// ("partition 6 (OEM)", a file's path), never a crash. It is an io/fs filesystem (iofs.go:
// Open, ReadDir, ReadFile, Stat, Lstat, ReadLink take io/fs names, "etc/x" or "."); the
// writing methods below, which only the ROOT bake uses, also take "/etc/x" and "".
type FS struct {
	Name string
	kind string // "ext4", "FAT", "squashfs"
	fs   filesystem.FileSystem
}

// PartitionName is how errors name partition p: "partition 6 (OEM)".
func PartitionName(p Partition) string { return fmt.Sprintf("partition %d (%s)", p.Number, p.Name) }

// guard turns a go-diskfs panic into *err.
func (f *FS) guard(err *error) {
	if v := recover(); v != nil {
		*err = f.corrupt(v)
	}
}

// guarded runs fn behind guard.
func guarded[T any](f *FS, fn func() (T, error)) (v T, err error) {
	defer f.guard(&err)
	return fn()
}

func (f *FS) corrupt(v any) error {
	err := fmt.Errorf("corrupt %s filesystem (the %s reader failed: %v)", f.kind, f.kind, v)
	if f.Name != "" {
		err = fmt.Errorf("%s: %w", f.Name, err)
	}
	return corruptError{err}
}

// corruptError is a go-diskfs panic, as an error (its message names the filesystem already).
type corruptError struct{ error }

func (e corruptError) Unwrap() error { return e.error }

// open runs a go-diskfs Read or Create behind recover.
func open(name, kind string, read func() (filesystem.FileSystem, error)) (f *FS, err error) {
	f = &FS{Name: name, kind: kind}
	defer f.guard(&err)
	if f.fs, err = read(); err != nil {
		return nil, err
	}
	return f, nil
}

// OpenExt4 reads the ext4 filesystem on dev (writes go to dev, which may refuse them).
func OpenExt4(dev vdisk.Disk, name string) (*FS, error) {
	if err := checkExt4(dev); err != nil {
		return nil, fmt.Errorf("%s: corrupt ext4 filesystem: %w", name, err)
	}
	view, err := withoutChecksums(dev)
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt ext4 filesystem: %w", name, err)
	}
	f, err := open(name, "ext4", func() (filesystem.FileSystem, error) {
		return ext4.Read(Backend(view, true), dev.Size(), 0, 512)
	})
	if err != nil && !strings.HasPrefix(err.Error(), name+":") {
		err = fmt.Errorf("%s: unreadable ext4 filesystem: %v", name, err)
	}
	return f, err
}

// CreateExt4 makes a fresh ext4 filesystem on dev.
func CreateExt4(dev vdisk.Disk, name string, p *ext4.Params) (*FS, error) {
	return open(name, "ext4", func() (filesystem.FileSystem, error) {
		return ext4.Create(Backend(dev, true), dev.Size(), 0, 512, p)
	})
}

// OpenFAT reads the FAT32 or FAT16 filesystem on dev (an EFI system partition); dev should be
// read-only unless the caller writes, as the drivers may update access times.
func OpenFAT(dev vdisk.Disk, name string) (*FS, error) {
	if err := checkFAT(dev); err != nil {
		return nil, fmt.Errorf("%s: no readable FAT filesystem: %w", name, err)
	}
	b := Backend(dev, true)
	f, err := open(name, "FAT", func() (filesystem.FileSystem, error) { return fat32.Read(b, dev.Size(), 0, 512) })
	if err == nil {
		return f, nil
	}
	f, err16 := open(name, "FAT", func() (filesystem.FileSystem, error) { return fat16.Read(b, dev.Size(), 0, 512) })
	if err16 == nil {
		return f, nil
	}
	return nil, fmt.Errorf("%s: no readable FAT filesystem (FAT32: %v; FAT16: %v)", name, err, err16)
}

// OpenSquashfs reads the squashfs image of size bytes in r (a sysext, possibly inside another
// filesystem), read-only. Callers check the superblock first (pkg/sysext does) and may leave
// name empty when they name the image themselves.
func OpenSquashfs(r io.ReaderAt, size, blockSize int64, name string) (*FS, error) {
	return open(name, "squashfs", func() (filesystem.FileSystem, error) {
		return squashfs.Read(Backend(vdisk.ReadOnly(r, size), false), size, 0, blockSize)
	})
}

// checkExt4 bounds what go-diskfs' Read allocates from the superblock: a crafted block count or
// group size makes it allocate terabytes (a fatal error recover cannot catch) or divide by zero.
func checkExt4(dev vdisk.Disk) error {
	sb := make([]byte, 1024)
	if n, _ := dev.ReadAt(sb, 1024); n < len(sb) {
		return fmt.Errorf("the superblock cannot be read")
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != 0xEF53 {
		return fmt.Errorf("no ext4 superblock")
	}
	logBlock := le.Uint32(sb[0x18:])
	if logBlock > 6 {
		return fmt.Errorf("block size 2^(10+%d) is out of range", logBlock)
	}
	blockSize := uint64(1024) << logBlock
	blocks := uint64(le.Uint32(sb[0x4:]))
	if le.Uint32(sb[0x60:])&0x80 != 0 { // INCOMPAT_64BIT
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	perGroup, inodesPerGroup := uint64(le.Uint32(sb[0x20:])), le.Uint32(sb[0x28:])
	switch {
	case blocks == 0 || blocks > uint64(dev.Size())/blockSize:
		return fmt.Errorf("%d blocks of %d bytes do not fit the %d bytes it is on", blocks, blockSize, dev.Size())
	case perGroup == 0 || perGroup > 8*blockSize:
		return fmt.Errorf("%d blocks per group is out of range", perGroup)
	case inodesPerGroup == 0 || uint64(inodesPerGroup) > 8*blockSize:
		return fmt.Errorf("%d inodes per group is out of range", inodesPerGroup)
	}
	return nil
}

// checkFAT bounds what go-diskfs' FAT drivers allocate and walk from the boot sector: a crafted
// FAT size makes them read (and loop over) hundreds of GiB.
func checkFAT(dev vdisk.Disk) error {
	var bs [512]byte
	if n, _ := dev.ReadAt(bs[:], 0); n < len(bs) {
		return fmt.Errorf("the boot sector cannot be read")
	}
	le := binary.LittleEndian
	sector := uint64(le.Uint16(bs[0x0b:]))
	reserved, fats := uint64(le.Uint16(bs[0x0e:])), uint64(bs[0x10])
	fatSize := uint64(le.Uint16(bs[0x16:]))
	if fatSize == 0 {
		fatSize = uint64(le.Uint32(bs[0x24:]))
	}
	switch {
	case sector != 512 && sector != 1024 && sector != 2048 && sector != 4096:
		return fmt.Errorf("%d bytes per sector is not a FAT sector size", sector)
	case bs[0x0d] == 0 || bs[0x0d]&(bs[0x0d]-1) != 0:
		return fmt.Errorf("%d sectors per cluster is not a power of two", bs[0x0d])
	case fats == 0 || fatSize == 0 || (reserved+fats*fatSize)*sector > uint64(dev.Size()):
		return fmt.Errorf("%d reserved sectors and %d FATs of %d sectors do not fit the %d bytes it is on", reserved, fats, fatSize, dev.Size())
	}
	return nil
}

// FSName turns "/etc/x" or "etc/x" into the io/fs name "etc/x" ("." for the root).
func FSName(name string) string {
	return cmp.Or(strings.TrimPrefix(path.Clean("/"+name), "/"), ".")
}

func (f *FS) ext4() (*ext4.FileSystem, error) {
	e, ok := f.fs.(*ext4.FileSystem)
	if !ok {
		return nil, fmt.Errorf("%s: not an ext4 filesystem", f.Name)
	}
	return e, nil
}

// OpenFile opens a file; its reads and writes are guarded too.
func (f *FS) OpenFile(name string, flag int) (file io.ReadWriteCloser, err error) {
	defer f.guard(&err)
	h, err := f.fs.OpenFile(FSName(name), flag)
	if err != nil {
		return nil, err
	}
	return &guardedFile{f: h, fs: f}, nil
}

func (f *FS) Mkdir(name string) (err error) {
	defer f.guard(&err)
	return f.fs.Mkdir(FSName(name))
}

func (f *FS) Symlink(target, name string) (err error) {
	defer f.guard(&err)
	return f.fs.Symlink(target, FSName(name))
}

func (f *FS) Chmod(name string, mode os.FileMode) (err error) {
	defer f.guard(&err)
	return f.fs.Chmod(FSName(name), mode)
}

func (f *FS) Chown(name string, uid, gid int) (err error) {
	defer f.guard(&err)
	return f.fs.Chown(FSName(name), uid, gid)
}

func (f *FS) Chtimes(name string, ctime, atime, mtime time.Time) (err error) {
	defer f.guard(&err)
	return f.fs.Chtimes(FSName(name), ctime, atime, mtime)
}

// GetXattr returns a file's extended attributes (ext4).
func (f *FS) GetXattr(name string) (x map[string][]byte, err error) {
	defer f.guard(&err)
	e, err := f.ext4()
	if err != nil {
		return nil, err
	}
	return e.GetXattr(FSName(name))
}

// Truncate sets a file's length (ext4; its OpenFile ignores O_TRUNC).
func (f *FS) Truncate(name string, size int64) (err error) {
	defer f.guard(&err)
	e, err := f.ext4()
	if err != nil {
		return err
	}
	return e.Truncate(FSName(name), size)
}

type guardedFile struct {
	f  filesystem.File
	fs *FS
}

func (g *guardedFile) Read(p []byte) (n int, err error) {
	defer g.fs.guard(&err)
	return g.f.Read(p)
}

func (g *guardedFile) Write(p []byte) (n int, err error) {
	defer g.fs.guard(&err)
	return g.f.Write(p)
}

func (g *guardedFile) Seek(off int64, whence int) (n int64, err error) {
	defer g.fs.guard(&err)
	return g.f.Seek(off, whence)
}

func (g *guardedFile) Close() (err error) {
	defer g.fs.guard(&err)
	return g.f.Close()
}

// Backend adapts a virtual disk (usually a partition Section) to go-diskfs's backend.Storage, so
// its ext4, FAT and squashfs drivers read (and, when writable, write) inside it only.
func Backend(dev vdisk.Disk, writable bool) backend.Storage {
	return &deviceBackend{dev: dev, r: io.NewSectionReader(dev, 0, dev.Size()), writable: writable}
}

type deviceBackend struct {
	dev      vdisk.Disk
	r        *io.SectionReader
	writable bool
}

func (d *deviceBackend) Stat() (fs.FileInfo, error)                { return sizeInfo(d.dev.Size()), nil }
func (d *deviceBackend) Read(p []byte) (int, error)                { return d.r.Read(p) }
func (d *deviceBackend) ReadAt(p []byte, off int64) (int, error)   { return d.dev.ReadAt(p, off) }
func (d *deviceBackend) WriteAt(p []byte, off int64) (int, error)  { return d.dev.WriteAt(p, off) }
func (d *deviceBackend) Seek(off int64, whence int) (int64, error) { return d.r.Seek(off, whence) }
func (d *deviceBackend) Close() error                              { return nil }
func (d *deviceBackend) Sys() (*os.File, error)                    { return nil, backend.ErrNotSuitable }
func (d *deviceBackend) Path() string                              { return "" }
func (d *deviceBackend) Writable() (backend.WritableFile, error) {
	if !d.writable {
		return nil, backend.ErrIncorrectOpenMode
	}
	return d, nil
}

type sizeInfo int64

func (s sizeInfo) Name() string       { return "partition" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() fs.FileMode  { return 0o600 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }
