// Package disk opens a disk image (raw or qcow2) as random-access storage, reads its partition
// table and hands out partitions as bounded sections.
package disk

import (
	"bytes"
	"io"
)

// Format is an image file format, detected from the header, never from the file name.
type Format string

const (
	FormatRaw   Format = "raw"
	FormatQcow2 Format = "qcow2"
)

var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// DetectFormat reads the first bytes of r: qcow2 by its magic, raw otherwise.
func DetectFormat(r io.ReaderAt) (Format, error) {
	var hdr [4]byte
	n, err := r.ReadAt(hdr[:], 0)
	if n < len(hdr) {
		if err == io.EOF || err == nil {
			return FormatRaw, nil
		}
		return "", err
	}
	if bytes.Equal(hdr[:], qcow2Magic) {
		return FormatQcow2, nil
	}
	return FormatRaw, nil
}
