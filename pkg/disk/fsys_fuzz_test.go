package disk_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/diskfs/go-diskfs/filesystem/ext4/crc"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// fuzzBase is a real filesystem made by mkfs, with the offsets of its non-zero 1 KiB blocks
// (where its metadata lives), which the fuzzer's patches land in.
type fuzzBase struct {
	img  []byte
	used []int
	ext4 bool
}

var (
	fuzzOnce  sync.Once
	fuzzBases []fuzzBase
	fuzzErr   error
)

func loadFuzzBases(t testing.TB) []fuzzBase {
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fsys-fuzz-")
		if err != nil {
			fuzzErr = err
			return
		}
		defer os.RemoveAll(dir)
		tree := filepath.Join(dir, "tree")
		os.MkdirAll(filepath.Join(tree, "lib", "deep"), 0o755)
		os.WriteFile(filepath.Join(tree, "lib", "os-release"), []byte("ID=flatcar\n"), 0o644)
		os.WriteFile(filepath.Join(tree, "lib", "deep", "big"), bytes.Repeat([]byte("flatcar "), 40000), 0o644)
		os.Symlink("lib/os-release", filepath.Join(tree, "link"))
		build := func(name string, mkfs ...string) []byte {
			p := filepath.Join(dir, name)
			os.WriteFile(p, nil, 0o644)
			os.Truncate(p, 36<<20)
			if out, err := exec.Command(mkfs[0], append(mkfs[1:], p)...).CombinedOutput(); err != nil && fuzzErr == nil {
				fuzzErr = &exec.Error{Name: string(out), Err: err}
			}
			b, _ := os.ReadFile(p)
			return b
		}
		csum := build("csum.ext4", "mkfs.ext4", "-q", "-F", "-b", "1024", "-d", tree)
		// Without metadata_csum (but with the checksum type go-diskfs insists on), so patches to
		// inodes, directories and extents reach the parser instead of failing a checksum.
		plain := build("plain.ext4", "mkfs.ext4", "-q", "-F", "-b", "1024", "-O", "^metadata_csum", "-d", tree)
		if len(plain) > 1024+0x176 {
			plain[1024+0x175] = 1
		}
		fat := build("esp.fat", "mkfs.vfat", "-F", "32", "-s", "1")
		if fuzzErr != nil {
			return
		}
		for _, b := range []fuzzBase{{img: csum, ext4: true}, {img: plain, ext4: true}, {img: fat}} {
			for o := 0; o+1024 <= len(b.img); o += 1024 {
				if !vdisk.IsZero(b.img[o : o+1024]) {
					b.used = append(b.used, o)
				}
			}
			fuzzBases = append(fuzzBases, b)
		}
	})
	if fuzzErr != nil {
		t.Fatalf("making the fuzz filesystems: %v", fuzzErr)
	}
	return fuzzBases
}

// FuzzFilesystems: a real ext4 (with and without metadata checksums) or FAT32, patched anywhere
// in its metadata (an ext4 superblock checksum is resealed so the patch reaches the parser), is
// opened and walked through disk.FS: errors are fine, a panic escaping the adapter is not, and
// the superblock checks keep go-diskfs from allocating or looping without bound.
func FuzzFilesystems(f *testing.F) {
	testutil.RequireTools(f, "mkfs.ext4", "mkfs.vfat")
	patch := func(pairs ...uint32) []byte {
		var b []byte
		for _, p := range pairs {
			b = binary.LittleEndian.AppendUint32(b, p)
		}
		return b
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(2), []byte{})
	// Block 0 is the ext4 superblock (1 KiB in) and the FAT boot sector.
	f.Add(uint8(0), patch(0x20|0<<24, 0x21|0<<24, 0x22|0<<24)) // superblock: 0 blocks per group
	f.Add(uint8(0), patch(0x04|0xff<<24, 0x07|0x7f<<24))       // superblock: 2^31 blocks
	f.Add(uint8(2), patch(0x27|0x0f<<24, 0x26|0xff<<24))       // FAT32: a 2^28-sector FAT
	f.Add(uint8(1), patch(9<<10|0x10|0xff<<24, 9<<10|0x30, 40<<10|3|7<<24))
	f.Fuzz(func(t *testing.T, kind uint8, p []byte) {
		bases := loadFuzzBases(t)
		base := bases[int(kind)%len(bases)]
		b := bytes.Clone(base.img)
		// Each 4-byte record: which used block (high bits) and where in it (low 10 bits), then the
		// byte to write (the record's last byte).
		for ; len(p) >= 4; p = p[4:] {
			r := binary.LittleEndian.Uint32(p)
			blk := base.used[int(r>>10)%len(base.used)]
			b[blk+int(r&0x3ff)] = p[3]
		}
		if base.ext4 {
			sb := b[1024:2048]
			binary.LittleEndian.PutUint32(sb[0x3fc:], crc.CRC32c(0xffffffff, sb[:0x3fc]))
		}
		dev := vdisk.ReadOnly(bytes.NewReader(b), int64(len(b)))
		var fsys *disk.FS
		var err error
		if base.ext4 {
			fsys, err = disk.OpenExt4(dev, "partition 3 (USR-A)")
		} else {
			fsys, err = disk.OpenFAT(dev, "partition 1 (EFI-SYSTEM)")
		}
		if err != nil {
			return
		}
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			ents, err := fsys.ReadDir(dir)
			if err != nil || depth > 3 {
				return
			}
			for i, e := range ents {
				if i > 64 || e.Name() == "." || e.Name() == ".." {
					continue
				}
				p := path.Join(dir, e.Name())
				fi, err := fsys.Stat(p)
				switch {
				case err != nil:
				case fi.IsDir():
					walk(p, depth+1)
				case fi.Mode().IsRegular() && fi.Size() < 1<<20:
					fsys.ReadFile(p)
					if ra, n, err := fsys.ReaderAt(p); err == nil && n > 10 {
						ra.ReadAt(make([]byte, 10), n/2)
					}
				default:
					fsys.ReadLink(p)
				}
			}
		}
		walk(".", 0)
	})
}
