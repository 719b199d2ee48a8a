package disk_test

// The go-diskfs evaluation (issue 11): every fixture is read by our parser and by go-diskfs'
// partition/gpt through disk.Backend, and the two must agree.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// diskfsPartitions reads s with go-diskfs and maps its entries onto disk.Partition.
func diskfsPartitions(s vdisk.Disk) (parts []disk.Partition, recovered bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-diskfs panicked: %v", r)
		}
	}()
	tbl, err := gpt.Read(disk.Backend(s, true), 512, 512)
	if err != nil {
		return nil, false, err
	}
	for _, p := range tbl.Partitions {
		parts = append(parts, disk.Partition{
			Number: p.Index, Name: p.Name, TypeGUID: string(p.Type), UUID: p.GUID,
			Start: int64(p.Start) * 512, Size: int64(p.Size),
		})
	}
	return parts, tbl.RecoveredFromBackup, nil
}

func TestGoDiskfsReadsEveryFixtureLikeOurParser(t *testing.T) {
	type fixture struct {
		name string
		opts flatcardisk.Options
	}
	var fixtures []fixture
	for _, k := range flatcardisk.Kinds {
		fixtures = append(fixtures, fixture{string(k), flatcardisk.Options{OEM: k}})
	}
	fixtures = append(fixtures, fixture{"hybrid-mbr", flatcardisk.Options{HybridMBR: true}})
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			raw := flatcardisk.Build(t, fx.opts)
			q := filepath.Join(t.TempDir(), "disk.qcow2")
			if _, err := convert.File(context.Background(), raw, q, convert.Options{}); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{raw, q} {
				img, err := disk.Open(path, false)
				if err != nil {
					t.Fatal(err)
				}
				ours, err := img.Partitions()
				if err != nil {
					t.Fatal(err)
				}
				theirs, recovered, err := diskfsPartitions(img.Disk)
				img.Close()
				if err != nil || recovered {
					t.Fatalf("%s: go-diskfs: %v (recovered from backup: %t)", path, err, recovered)
				}
				if !reflect.DeepEqual(ours, theirs) {
					t.Fatalf("%s: ours %+v\ngo-diskfs %+v", path, ours, theirs)
				}
				numbers := []int{}
				for _, p := range ours {
					numbers = append(numbers, p.Number)
				}
				if fx.opts.OEM != flatcardisk.OEMNone && !reflect.DeepEqual(numbers, []int{1, 2, 3, 4, 6, 7, 9}) {
					t.Fatalf("%s: partition numbers %v, want Flatcar's 1-4,6,7,9", path, numbers)
				}
			}
		})
	}
}

// TestGoDiskfsRecoversFromBackupAndSaysSo: with the primary header zeroed both parsers fall back
// to the backup header, and both say so (go-diskfs: RecoveredFromBackup; ours: PrimaryGPTError).
func TestGoDiskfsRecoversFromBackupAndSaysSo(t *testing.T) {
	src := flatcardisk.Build(t, flatcardisk.Options{})
	path := filepath.Join(t.TempDir(), "damaged.raw")
	copyFile(t, src, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 512), 512)
	f.Close()
	img, err := disk.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	ours, err := img.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	theirs, recovered, err := diskfsPartitions(img.Disk)
	if err != nil || !recovered || !reflect.DeepEqual(ours, theirs) {
		t.Fatalf("go-diskfs: err %v recovered %t\nours %+v\ntheirs %+v", err, recovered, ours, theirs)
	}
	if err := disk.PrimaryGPTError(img.Disk); err == nil || !strings.Contains(err.Error(), "no 'EFI PART' signature at LBA 1") {
		t.Fatalf("PrimaryGPTError on a zeroed primary header: %v", err)
	}
	clean, _ := disk.Open(src, false)
	defer clean.Close()
	if err := disk.PrimaryGPTError(clean.Disk); err != nil {
		t.Fatalf("PrimaryGPTError on a clean image: %v", err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := flatcardisk.CopySparse(src, dst); err != nil {
		t.Fatal(err)
	}
}

// fixCRCs makes a fuzzed image's primary GPT checksums valid, so mutations reach the entry parsing
// of both readers instead of stopping at a checksum.
func fixCRCs(img []byte) {
	if len(img) < 1024 || string(img[512:520]) != "EFI PART" {
		return
	}
	h := img[512:1024]
	lba := binary.LittleEndian.Uint64(h[72:])
	n := uint64(binary.LittleEndian.Uint32(h[80:])) * uint64(binary.LittleEndian.Uint32(h[84:]))
	if lba < uint64(len(img))/512 && n <= uint64(len(img))-lba*512 {
		binary.LittleEndian.PutUint32(h[88:], crc32.ChecksumIEEE(img[lba*512:lba*512+n]))
	}
	binary.LittleEndian.PutUint32(h[16:], 0)
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
}

// FuzzGPTReadersAgree runs our parser and go-diskfs' on the same image: whenever both accept
// a table, they must have read the same partitions. Ours refusing what go-diskfs accepts is
// expected (it reads negative sizes and entries over the MBR: TestGoDiskfsGPTEvidence), so this
// oracle is not in `make test`'s fuzz run; `make fuzz-oracles` runs it.
func FuzzGPTReadersAgree(f *testing.F) {
	seed := make([]byte, 68*512)
	copy(seed[512:], "EFI PART")
	copy(seed[520:], []byte{0, 0, 1, 0, 92, 0, 0, 0})
	binary.LittleEndian.PutUint64(seed[512+24:], 1)
	binary.LittleEndian.PutUint64(seed[512+32:], 67)
	binary.LittleEndian.PutUint64(seed[512+40:], 34) // usable LBAs 34-60: the entry must lie inside them
	binary.LittleEndian.PutUint64(seed[512+48:], 60)
	binary.LittleEndian.PutUint64(seed[512+72:], 2)
	binary.LittleEndian.PutUint32(seed[512+80:], 128)
	binary.LittleEndian.PutUint32(seed[512+84:], 128)
	copy(seed[1024:], []byte("\x28\x73\x2a\xc1\x1f\xf8\xd2\x11\xba\x4b\x00\xa0\xc9\x3e\xc9\x3b"))
	copy(seed[1024+16:], "0123456789abcdef")
	binary.LittleEndian.PutUint64(seed[1024+32:], 34)
	binary.LittleEndian.PutUint64(seed[1024+40:], 40)
	copy(seed[1024+56:], []byte{'O', 0, 'E', 0, 'M', 0})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		img := append([]byte{}, data...)
		fixCRCs(img)
		ours, oursErr := disk.ReadGPT(memDevice(img))
		theirs, _, theirErr := diskfsPartitions(memDevice(img))
		if theirErr != nil {
			return // including go-diskfs' known panics (TestGoDiskfsGPTEvidence)
		}
		if oursErr != nil {
			t.Logf("ours refused what go-diskfs read as %+v: %v", theirs, oursErr)
			return
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("ours %+v\ngo-diskfs %+v", ours, theirs)
		}
	})
}

type memDevice []byte

func (m memDevice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (m memDevice) WriteAt(p []byte, off int64) (int, error) { return 0, disk.ErrReadOnly }
func (m memDevice) Size() int64                              { return int64(len(m)) }
func (m memDevice) Close() error                             { return nil }

// craftGPT is a 68-sector image whose primary header (valid checksum) claims count entries of
// size bytes at entriesLBA; the entry checksum is taken over the bytes go-diskfs will read.
func craftGPT(count, size uint32, entriesLBA uint64, entries []byte) []byte {
	img := make([]byte, 68*512)
	copy(img, entries)
	h := img[512:1024]
	copy(h, "EFI PART")
	copy(h[8:], []byte{0, 0, 1, 0, 92, 0, 0, 0})
	binary.LittleEndian.PutUint64(h[24:], 1)
	binary.LittleEndian.PutUint64(h[32:], 67)
	binary.LittleEndian.PutUint64(h[72:], entriesLBA)
	binary.LittleEndian.PutUint32(h[80:], count)
	binary.LittleEndian.PutUint32(h[84:], size)
	if n := int(count) * int(size); n > 0 && n <= 512 {
		binary.LittleEndian.PutUint32(h[88:], crc32.ChecksumIEEE(img[:n]))
	}
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
	return img
}

// TestGoDiskfsGPTEvidence is why pkg/disk keeps its own GPT parser (docs/architecture.md): on these
// inputs go-diskfs v1.9.4's gpt.Read panics or reads a table that is not there, where ours
// refuses the image. When a go-diskfs upgrade makes this test fail, re-run the evaluation.
func TestGoDiskfsGPTEvidence(t *testing.T) {
	esp := func(first, last uint64) []byte {
		e := make([]byte, 128)
		copy(e, "\x28\x73\x2a\xc1\x1f\xf8\xd2\x11\xba\x4b\x00\xa0\xc9\x3e\xc9\x3b")
		binary.LittleEndian.PutUint64(e[32:], first)
		binary.LittleEndian.PutUint64(e[40:], last)
		return e
	}
	entry := esp(40, 34) // a partition whose last LBA is before its first
	for _, c := range []struct {
		name, want string
		img        []byte
	}{
		{"4294967295 entries of 4294967295 bytes", "panicked", craftGPT(0xFFFFFFFF, 0xFFFFFFFF, 2, nil)},
		{"2^31 entries of 2^31 bytes", "panicked", craftGPT(1<<31, 1<<31, 2, nil)},
		// 2^55 sectors * 512 wraps to byte 0: the MBR sector is read as the partition array.
		{"partition array at LBA 2^55", "read", craftGPT(4, 128, 1<<55, esp(34, 40))},
		{"entry ending before it starts", "read", func() []byte {
			img := craftGPT(1, 128, 2, nil)
			copy(img[1024:], entry)
			binary.LittleEndian.PutUint32(img[512+88:], crc32.ChecksumIEEE(img[1024:1152]))
			binary.LittleEndian.PutUint32(img[512+16:], 0)
			binary.LittleEndian.PutUint32(img[512+16:], crc32.ChecksumIEEE(img[512:604]))
			return img
		}()},
	} {
		if _, err := disk.ReadGPT(memDevice(c.img)); err == nil {
			t.Errorf("%s: our parser accepted it", c.name)
		}
		parts, _, err := diskfsPartitions(memDevice(c.img))
		got := "read"
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: go-diskfs now gives %q (partitions %+v), the evidence was %q: re-evaluate switching to it", c.name, got, parts, c.want)
		}
		t.Logf("%s: go-diskfs %s %+v", c.name, got, parts)
	}
}
func (m memDevice) Extents(_ context.Context, fn func(off, n int64) error) error {
	return fn(0, m.Size())
}
