package disk

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// makeGPT writes a small Flatcar-like GPT with the real sgdisk.
func makeGPT(t *testing.T, hybrid bool) string {
	t.Helper()
	testutil.RequireTools(t, "sgdisk")
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(path, 64<<20)
	args := []string{"-a", "4096",
		"-n", "1:4096:+8M", "-t", "1:C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "-c", "1:EFI-SYSTEM",
		"-n", "2:0:+2M", "-t", "2:21686148-6449-6E6F-744E-656564454649", "-c", "2:BIOS-BOOT",
		"-n", "6:0:+16M", "-t", "6:0FC63DAF-8483-4772-8E79-3D69D8477DE4", "-c", "6:OEM",
		"-n", "9:0:0", "-t", "9:3884DD41-8582-4404-B9A8-E9B84F2DF50E", "-c", "9:ROOT"}
	if hybrid {
		args = append(args, "-h", "1:EE")
	}
	testutil.MustRun(t, "sgdisk", append(args, path)...)
	return path
}

func TestReadGPTOfRealTable(t *testing.T) {
	path := makeGPT(t, false)
	img, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	parts, err := img.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 4 {
		t.Fatalf("got %d partitions: %+v", len(parts), parts)
	}
	oem, err := img.FindPartition("OEM")
	if err != nil {
		t.Fatal(err)
	}
	if oem.Number != 6 || oem.Size != 16<<20 || oem.Start%(2<<20) != 0 || TypeNames[oem.TypeGUID] != "data" {
		t.Fatalf("OEM partition %+v", oem)
	}
	if _, err := img.FindPartition("USR-A"); err == nil {
		t.Fatal("found a partition that does not exist")
	}
	mbr, _ := ReadMBR(img.Disk)
	if mbr.Kind != MBRProtective {
		t.Fatalf("MBR kind %s, want protective", mbr.Kind)
	}
}

func TestHybridMBRIsDetectedAndReplaced(t *testing.T) {
	path := makeGPT(t, true)
	img, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	mbr, _ := ReadMBR(img.Disk)
	if mbr.Kind != MBRHybrid {
		t.Fatalf("sgdisk -h made a %s MBR (types %v)", mbr.Kind, mbr.Types)
	}
	if err := WriteProtectiveMBR(img.Disk); err != nil {
		t.Fatal(err)
	}
	img.Close()
	out, err := exec.Command("sgdisk", "-v", path).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("No problems found")) {
		t.Fatalf("sgdisk -v after protective MBR: %v\n%s", err, out)
	}
	img, _ = Open(path, false)
	defer img.Close()
	if mbr, _ = ReadMBR(img.Disk); mbr.Kind != MBRProtective {
		t.Fatalf("after rewrite: %s", mbr.Kind)
	}
}

// The protective MBR is the UEFI specification's, byte for byte (5.2.3, Table "Protective MBR
// Partition Record"), on a disk CHS can address and one it cannot, over a hybrid MBR as sgdisk -h
// writes it; the real gdisk and fdisk read it as one 0xEE entry over the whole disk.
func TestProtectiveMBRIsTheUEFISpecifications(t *testing.T) {
	testutil.RequireTools(t, "gdisk", "fdisk")
	for _, size := range []int64{64 << 20, 16 << 30} {
		path := makeGPT(t, true)
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		testutil.MustRun(t, "sgdisk", "-e", path) // the backup GPT to the new end, hybrid MBR kept
		// The first and last MiB: the MBR, the GPTs and the partitions' starts (a whole read of
		// the sparse 16 GiB file would take minutes).
		ends := func() []byte {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 2<<20)
			if _, err := f.ReadAt(b[:1<<20], 0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(b[1<<20:], size-1<<20); err != nil {
				t.Fatal(err)
			}
			return b
		}
		before := ends()
		img, err := Open(path, true)
		if err != nil {
			t.Fatal(err)
		}
		if mbr, _ := ReadMBR(img.Disk); mbr.Kind != MBRHybrid {
			t.Fatalf("%d bytes: sgdisk -h made a %s MBR", size, mbr.Kind)
		}
		if err := WriteProtectiveMBR(img.Disk); err != nil {
			t.Fatal(err)
		}
		img.Close()
		got := ends()

		sectors := size / 512
		want := make([]byte, 512)
		copy(want[:440], before[:440]) // boot code: kept
		e := want[446:462]
		e[1], e[2], e[3] = 0x00, 0x02, 0x00 // StartingCHS
		e[4] = 0xEE
		if c := (sectors - 1) / (255 * 63); c <= 1023 { // EndingCHS of the last block
			h, s := (sectors-1)/63%255, (sectors-1)%63+1
			e[5], e[6], e[7] = byte(h), byte(s)|byte(c>>8)<<6, byte(c)
		} else {
			e[5], e[6], e[7] = 0xFF, 0xFF, 0xFF
		}
		binary.LittleEndian.PutUint32(e[8:], 1)
		binary.LittleEndian.PutUint32(e[12:], uint32(min(sectors-1, 0xFFFFFFFF)))
		want[510], want[511] = 0x55, 0xAA
		if !bytes.Equal(got[:512], want) {
			t.Errorf("%d bytes: sector 0\n got %x\nwant %x", size, got[440:512], want[440:512])
		}
		if !bytes.Equal(got[512:], before[512:]) {
			t.Errorf("%d bytes: WriteProtectiveMBR changed more than sector 0", size)
		}
		if out := testutil.MustRun(t, "gdisk", "-l", path); !strings.Contains(out, "MBR: protective") {
			t.Errorf("gdisk -l does not see a protective MBR:\n%s", out)
		}
		out := testutil.MustRun(t, "fdisk", "-l", "-t", "dos", "-o", "Device,Start,Sectors,Id", path)
		if !strings.Contains(strings.Join(strings.Fields(out), " "), fmt.Sprintf("%s1 %d %d ee", path, 1, sectors-1)) || strings.Count(out, path) != 2 {
			t.Errorf("fdisk -t dos does not see one 0xEE entry from sector 1 over %d sectors:\n%s", sectors-1, out)
		}
	}
}

func TestNoGPT(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zero.raw")
	os.WriteFile(path, make([]byte, 1<<20), 0o644)
	img, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if _, err := img.Partitions(); err == nil {
		t.Fatal("zeroes parsed as a GPT")
	}
}

func TestCopySparseKeepsHolesAndBytes(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.Create(filepath.Join(dir, "src"))
	src.Truncate(256 << 20)
	src.WriteAt(bytes.Repeat([]byte("flatcar"), 1000), 100<<20)
	src.WriteAt([]byte("tail"), 256<<20-4)
	dst, _ := os.Create(filepath.Join(dir, "dst"))
	if err := CopySparse(context.Background(), dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	a, _ := os.ReadFile(src.Name())
	b, _ := os.ReadFile(dst.Name())
	if !bytes.Equal(a, b) {
		t.Fatal("copy differs")
	}
	var st1, st2 = statBlocks(t, src.Name()), statBlocks(t, dst.Name())
	if st2 > st1+1024 {
		t.Fatalf("copy is not sparse: %d blocks vs %d", st2, st1)
	}
}

func FuzzReadGPT(f *testing.F) {
	hdr := make([]byte, 4096)
	copy(hdr[512:], "EFI PART")
	f.Add(hdr)
	f.Fuzz(func(t *testing.T, data []byte) {
		ReadGPT(memStorage(data))
		ReadMBR(memStorage(data))
	})
}

type memStorage []byte

func (m memStorage) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m)) {
		return 0, os.ErrClosed
	}
	return copy(p, m[off:]), nil
}
func (m memStorage) WriteAt(p []byte, off int64) (int, error) { return 0, ErrReadOnly }
func (m memStorage) Size() int64                              { return int64(len(m)) }
func (m memStorage) Extents(_ context.Context, fn func(off, n int64) error) error {
	return fn(0, m.Size())
}
