package btrfs

import (
	"os"
	"testing"
)

// BenchmarkOEMSet is what `oem set` does to a 1 GiB OEM filesystem: open it, read grub.cfg,
// rewrite grub.cfg.
func BenchmarkOEMSet(b *testing.B) {
	img := mkImage(b, variant{"1GiB", mixedSingle.mkfsArgs, true, 1 << 30}, qemuOEM(true))
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	contents := [][]byte{[]byte(openstackGrub), []byte(qemuGrub)}
	for i := 0; b.Loop(); i++ {
		fs, err := Open(f, 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fs.read("/grub.cfg"); err != nil {
			b.Fatal(err)
		}
		if err := fs.write(f, "/grub.cfg", contents[i%2]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	btrfsCheck(b, img)
}
