// Package disk opens a disk image (raw or qcow2) as random-access storage, reads its partition
// table and hands out partitions as bounded sections.
package disk

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Format is an image file format, detected from the header, never from the file name.
type Format string

const (
	FormatRaw   Format = "raw"
	FormatQcow2 Format = "qcow2"
)

var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// ErrNotDiskImage is wrapped by every refusal of a file that is not a raw or qcow2 disk image.
var ErrNotDiskImage = errors.New("not a qcow2 or raw disk image")

// UnsupportedFormatError is a file in a format we recognise but do not open as a disk image
// (compressed, another hypervisor's format, an ISO). It says how to get a usable image.
type UnsupportedFormatError struct {
	Path string
	Kind string // "bzip2", "gzip", "xz", "zstd", "zip", "VMDK", "VHD", "VHDX", "ISO 9660"
	Fix  string
}

func (e *UnsupportedFormatError) Error() string {
	what := e.Kind + "-compressed" // decompressing it gives an image
	if !slices.Contains([]string{"bzip2", "gzip", "xz", "zstd"}, e.Kind) {
		what = "a " + e.Kind + " image"
	}
	name := cmp.Or(e.Path, "the file")
	fix := e.Fix
	if e.Path != "" {
		fix = strings.ReplaceAll(fix, "FILE", e.Path)
	}
	return fmt.Sprintf("%s is %s, %v: %s", name, what, ErrNotDiskImage, fix)
}

func (e *UnsupportedFormatError) Unwrap() error { return ErrNotDiskImage }

const fetchHint = "flatcar-capo fetch downloads, verifies and decompresses release images"

// refused are the formats recognised by a magic at a fixed offset.
var refused = []struct {
	off   int64
	magic []byte
	kind  string
	fix   string
}{
	{0, []byte("BZh"), "bzip2", "decompress it first: " + fetchHint + ", or run 'lbzip2 -dk FILE' (or 'bunzip2 -k FILE')"},
	{0, []byte{0x1f, 0x8b}, "gzip", "decompress it first: " + fetchHint + ", or run 'gunzip -k FILE'"},
	{0, []byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz", "decompress it first with 'unxz -k FILE'"},
	{0, []byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd", "decompress it first with 'unzstd FILE'"},
	{0, []byte("PK\x03\x04"), "zip", "unpack it first with 'unzip FILE'"},
	{0, []byte("KDMV"), "VMDK", "convert it with 'qemu-img convert -O qcow2 FILE OUT.qcow2'"},
	{0, []byte("# Disk DescriptorFile"), "VMDK", "convert it with 'qemu-img convert -O qcow2 FILE OUT.qcow2'"},
	{0, []byte("vhdxfile"), "VHDX", "convert it with 'qemu-img convert -O qcow2 FILE OUT.qcow2'"},
	{0, []byte("conectix"), "VHD", "convert it with 'qemu-img convert -O qcow2 FILE OUT.qcow2'"},
	{0x8001, []byte("CD001"), "ISO 9660", "an ISO is a CD image, not a Flatcar disk: use the .img or .bin release image"},
}

// vhdFooter is where a fixed VHD keeps its only "conectix" cookie: the last 512 bytes.
const vhdFooter = 512

// DetectFormat reads the header of r: qcow2 by its magic, an *UnsupportedFormatError for the
// formats we refuse (compressed, VMDK, VHD/VHDX, ISO), raw otherwise. Every command that opens
// an image goes through here (disk.Open and glance.DetectFileFormat).
func DetectFormat(r io.ReaderAt) (Format, error) {
	var hdr [0x8001 + 5]byte
	n, err := r.ReadAt(hdr[:], 0)
	if n < len(hdr) && err != nil && err != io.EOF {
		return "", err
	}
	head := hdr[:n]
	if bytes.HasPrefix(head, qcow2Magic) {
		return FormatQcow2, nil
	}
	for _, m := range refused {
		if int64(len(head)) >= m.off+int64(len(m.magic)) && bytes.Equal(head[m.off:m.off+int64(len(m.magic))], m.magic) {
			return "", &UnsupportedFormatError{Kind: m.kind, Fix: m.fix}
		}
	}
	if size := sizeOf(r); size >= vhdFooter {
		var cookie [8]byte
		if _, err := r.ReadAt(cookie[:], size-vhdFooter); err == nil && string(cookie[:]) == "conectix" {
			return "", &UnsupportedFormatError{Kind: "VHD", Fix: "convert it with 'qemu-img convert -O qcow2 FILE OUT.qcow2'"}
		}
	}
	return FormatRaw, nil
}

// withPath names path in an *UnsupportedFormatError.
func withPath(err error, path string) error {
	var ue *UnsupportedFormatError
	if errors.As(err, &ue) {
		ue.Path = path
	}
	return err
}

func sizeOf(r io.ReaderAt) int64 {
	switch s := r.(type) {
	case interface{ Stat() (os.FileInfo, error) }:
		if st, err := s.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	case interface{ Size() int64 }:
		return s.Size()
	}
	return -1
}
