package btrfs

import (
	"bytes"
	"compress/zlib"
)

// Inode flags under which the kernel never compresses a file's data.
const (
	inodeNodatasum  = 1 << 0
	inodeNodatacow  = 1 << 1
	inodeNocompress = 1 << 3
)

// zlibLevel is the kernel's default compress=zlib level; Go writes the same 0x78 0x5e header.
const zlibLevel = 3

// inlineData is new file content with the inline extent forms that can hold it.
type inlineData struct {
	raw     []byte
	plainOK bool   // fits an uncompressed inline extent
	zlib    []byte // a plain zlib stream (the kernel's inline format), or nil when it does not pay or fit
}

// newInlineData applies the kernel's inline rules (can_cow_file_range_inline) and those of
// btrfs check: the stored bytes, compressed or not, stay within MaxInline; uncompressed
// content must also be below a sector; compressed content may be up to a sector and must
// shrink. It refuses content no inline form can hold.
func (fs *FS) newInlineData(data []byte) (inlineData, error) {
	d := inlineData{raw: data, plainOK: len(data) <= fs.MaxInline()}
	if len(data) > 0 && len(data) <= int(fs.sb.sectorSize) {
		var b bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&b, zlibLevel) // a constant valid level cannot fail
		zw.Write(data)                              // a bytes.Buffer does not fail
		zw.Close()
		if b.Len() < len(data) && b.Len() <= fs.MaxInline() {
			d.zlib = b.Bytes()
		}
	}
	if !d.plainOK && d.zlib == nil {
		return d, noRoomf("%d bytes do not fit in an inline extent (at most %d stored bytes, and at most %d before zlib compression); writing regular extents is out of reach",
			len(data), fs.MaxInline(), fs.sb.sectorSize)
	}
	return d, nil
}

// extentBody builds an EXTENT_DATA body for generation gen.
type extentBody func(gen uint64) []byte

// forms lists the extent bodies to try, preferred first. A file whose extent was compressed
// stays compressed when zlib pays off (as the kernel keeps compressing it); otherwise the plain
// form comes first and zlib is the fallback when the plain one does not fit. mayCompress is
// false for inodes the kernel would not compress.
func (d inlineData) forms(wasCompressed, mayCompress bool) []extentBody {
	plain := func(gen uint64) []byte { return marshalInlineExtent(gen, len(d.raw), compressNone, d.raw) }
	packed := func(gen uint64) []byte { return marshalInlineExtent(gen, len(d.raw), compressZlib, d.zlib) }
	switch {
	case !mayCompress || d.zlib == nil:
		if d.plainOK {
			return []extentBody{plain}
		}
		return nil
	case wasCompressed || !d.plainOK:
		return []extentBody{packed}
	}
	return []extentBody{plain, packed}
}

// mayCompress is false for inodes whose flags forbid compression.
func mayCompress(i inodeItem) bool {
	return i.flags()&(inodeNodatasum|inodeNodatacow|inodeNocompress) == 0
}
