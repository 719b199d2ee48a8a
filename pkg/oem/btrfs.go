package oem

import (
	"errors"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// writeFile rewrites name in place. Content too big for a btrfs OEM's in-place rewrite gets a
// message saying so and what to do, not the btrfs package's "unsupported layout".
func writeFile(fsys disk.WritableFS, name string, data []byte) error {
	err := fsys.WriteFile(name, data)
	if b, ok := fsys.(*btrfs.FS); ok && errors.Is(err, btrfs.ErrNoRoom) {
		return &NoRoomError{File: "/" + name, Size: len(data), MaxStored: b.MaxInline(), detail: err}
	}
	return err
}

// NoRoomError is a file too big for the in-place rewrite of a btrfs OEM partition. Nothing was
// written when it is returned.
type NoRoomError struct {
	File      string
	Size      int // bytes of the new content
	MaxStored int // most bytes one inline extent stores (compressed content up to a sector may fit)
	detail    error
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("the new %s (%d bytes) does not fit in the btrfs OEM partition: flatcar-capo rewrites a btrfs file in place "+
		"as one inline extent, which stores at most %d bytes (zlib-compressed when that helps), and its tree leaf must have room too. "+
		"Nothing was written. Shorten --linux-append (kernel arguments added by earlier runs stay: start again from the original "+
		"image to drop them), or pass long kernel arguments another way (Ignition's kernelArguments)",
		e.File, e.Size, e.MaxStored)
}

func (e *NoRoomError) Unwrap() error { return e.detail }
