package disk

import (
	"fmt"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// DetectFileFormat is DetectFormat on the file at path, refusals naming it (an empty file is
// raw here, too small for anything else).
func DetectFileFormat(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	format, err := DetectFormat(f)
	return format, withPath(err, path)
}

// Grow enlarges a raw image file to size bytes (the new space is a hole) and moves its backup
// GPT to the new end, as build's disk-size step does with Packer's grown disk. A size equal to
// the current one only relocates; a smaller one is refused.
func Grow(path string, size int64) error {
	img, err := Open(path, true)
	if err != nil {
		return err
	}
	defer img.Close()
	old := img.Size()
	switch {
	case img.raw == nil:
		return fmt.Errorf("%s is not a raw image; only raw images can be grown", path)
	case size%sectorSize != 0:
		return fmt.Errorf("disk size %d is not a multiple of %d bytes", size, sectorSize)
	case size < old:
		return fmt.Errorf("%s is %d bytes; shrinking it to %d would cut partitions (only growing is supported)", path, old, size)
	}
	if err := img.f.Truncate(size); err != nil {
		return fmt.Errorf("cannot grow %s: %w", path, err)
	}
	grown, err := vdisk.NewFile(img.f, true)
	if err == nil {
		err = relocateBackupGPT(grown)
	}
	if err != nil {
		img.f.Truncate(old) // leave the image as it was
		return fmt.Errorf("%s: %w", path, err)
	}
	return img.Close()
}
