package build

import (
	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// overlayMethods edit a copy-on-write overlay over the base instead of a raw work copy: the
// qcow2 step then reads each byte of the base once (decoding a compressed base on every core)
// and writes it once. The Packer method needs a file for QEMU.
var overlayMethods = map[string]bool{MethodSysext: true}

// workOverlay is KeyOverlay's value: the opened base and the overlay over it.
type workOverlay struct {
	name string // the base's path, what messages call the image
	base *disk.Image
	*vdisk.Overlay
}

func (w *workOverlay) close() {
	w.Overlay.Close()
	w.base.Close()
}

func overlay(state multistep.StateBag) *workOverlay {
	w, _ := state.Get(KeyOverlay).(*workOverlay)
	return w
}

// image is the overlay as an Image (the caller must not Close the overlay through it).
func (w *workOverlay) image(writable bool) *disk.Image {
	return disk.FromDisk(w.name, w.Overlay, writable)
}
