package build

import (
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// overlayMethods edit a copy-on-write overlay over the base instead of a raw work copy: the
// qcow2 step then reads each byte of the base once (decoding a compressed base on every core)
// and writes it once. The Packer method needs a file for QEMU.
var overlayMethods = map[string]bool{MethodSysext: true}

// The work image is the one image the steps after the work copy change and read: a
// copy-on-write overlay over the base (overlay methods), or the raw file the method's steps
// leave (the work copy itself, or packer's disk once packer has exited), opened the first time
// a step asks for it. Every step takes it as a *disk.Image, whatever its shape.
type workImage struct {
	img   *disk.Image
	close func() // closes img and what it reads through (the overlay's base)
}

// setWorkImage makes img the work image; close releases it when the build ends (stepWorkCopy's
// Cleanup) or when a method step hands over another file.
func setWorkImage(state multistep.StateBag, img *disk.Image, close func()) {
	closeWork(state)
	keyWorkImage.put(state, &workImage{img: img, close: close})
}

// setWorkFile makes the raw file at path the work image, from the next step that asks for it on.
func setWorkFile(state multistep.StateBag, path string) {
	closeWork(state)
	keyWorkFile.put(state, path)
}

// workFile is the raw work file ("" for an overlay method).
func workFile(state multistep.StateBag) string { return keyWorkFile.get(state) }

// openWork is the work image, opened for writing from the work file the first time.
func openWork(state multistep.StateBag) (*disk.Image, error) {
	if w := keyWorkImage.get(state); w != nil {
		return w.img, nil
	}
	path := workFile(state)
	if path == "" {
		return nil, fmt.Errorf("the %s method produced no image", options(state).Method)
	}
	img, err := disk.Open(path, true)
	if err != nil {
		return nil, err
	}
	keyWorkImage.put(state, &workImage{img: img, close: func() { img.Close() }})
	return img, nil
}

// closeWork closes the work image, if one is open.
func closeWork(state multistep.StateBag) {
	if w := keyWorkImage.get(state); w != nil {
		w.close()
		keyWorkImage.remove(state)
	}
}
