package imagebuild

import (
	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// overlayMethods edit a copy-on-write overlay over the base instead of a raw work copy: the
// qcow2 step then reads each byte of the base once (decoding a compressed base on every core)
// and writes it once. The Packer method needs a file for QEMU.
var overlayMethods = map[string]bool{MethodSysext: true}

// workImage is the one image the steps after the work copy read and change, whatever its shape:
// a copy-on-write overlay over the base (overlay methods), or the raw file the method's steps
// leave (the work copy, or packer's disk once packer has exited), opened when a step first asks.
type workImage struct {
	*disk.Image
	close func() error // closes the image and what it reads through (the overlay's base)
}

// setWorkFile makes the raw file at path the work image, from the next openWork on.
func setWorkFile(state multistep.StateBag, path string) {
	closeWork(state)
	keyWorkFile.put(state, path)
}

// openWork is the work image, the work file opened for writing the first time.
func openWork(state multistep.StateBag) (*disk.Image, error) {
	if w := keyWorkImage.get(state); w != nil {
		return w.Image, nil
	}
	img, err := disk.Open(keyWorkFile.get(state), true)
	if err != nil {
		return nil, err
	}
	keyWorkImage.put(state, &workImage{img, img.Close})
	return img, nil
}

// closeWork closes the work image, if one is open (stepWorkCopy's Cleanup, or a new work file).
func closeWork(state multistep.StateBag) {
	if w := keyWorkImage.get(state); w != nil {
		w.close()
		keyWorkImage.remove(state)
	}
}
