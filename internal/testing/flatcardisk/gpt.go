package flatcardisk

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"unicode/utf16"
)

const (
	sector     = 512
	numEntries = 128
	entrySize  = 128
	// Flatcar images carry this disk GUID until first boot randomizes it.
	flatcarDiskGUID = "00000000-0000-0000-0000-000000000001"
)

// writeGPT writes the primary and backup GPT of a disk of diskSize bytes.
func writeGPT(f *os.File, diskSize int64, parts []part) error {
	entries := make([]byte, numEntries*entrySize)
	for _, p := range parts {
		e := entries[(p.Number-1)*entrySize : p.Number*entrySize]
		copy(e[0:16], guidBytes(p.TypeGUID))
		copy(e[16:32], guidBytes(p.UUID))
		binary.LittleEndian.PutUint64(e[32:], uint64(p.Start/sector))
		binary.LittleEndian.PutUint64(e[40:], uint64((p.Start+p.Size)/sector-1))
		binary.LittleEndian.PutUint64(e[48:], p.Attrs)
		for i, c := range utf16.Encode([]rune(p.Name)) {
			binary.LittleEndian.PutUint16(e[56+2*i:], c)
		}
	}
	lastLBA := uint64(diskSize/sector - 1)
	arraySectors := uint64(numEntries * entrySize / sector)
	entriesCRC := crc32.ChecksumIEEE(entries)
	header := func(current, backup, entriesLBA uint64) []byte {
		h := make([]byte, sector)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], current)
		binary.LittleEndian.PutUint64(h[32:], backup)
		binary.LittleEndian.PutUint64(h[40:], 2+arraySectors)
		binary.LittleEndian.PutUint64(h[48:], lastLBA-1-arraySectors)
		copy(h[56:72], guidBytes(flatcarDiskGUID))
		binary.LittleEndian.PutUint64(h[72:], entriesLBA)
		binary.LittleEndian.PutUint32(h[80:], numEntries)
		binary.LittleEndian.PutUint32(h[84:], entrySize)
		binary.LittleEndian.PutUint32(h[88:], entriesCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	writes := []struct {
		off  int64
		data []byte
	}{
		{1 * sector, header(1, lastLBA, 2)},
		{2 * sector, entries},
		{int64(lastLBA-arraySectors) * sector, entries},
		{int64(lastLBA) * sector, header(lastLBA, 1, lastLBA-arraySectors)},
	}
	for _, w := range writes {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			return fmt.Errorf("writing the GPT: %w", err)
		}
	}
	return nil
}

// writeMBR writes the MBR partition entries and signature, keeping the boot code area (0..445).
// Protective: one 0xEE entry over the whole disk. Hybrid, as `sgdisk -h 1` makes it and Flatcar
// before stable 4459.2.0 ships it: 0xEE over the GPT structures up to the ESP, then the ESP as a
// 0xEF entry, here marked active (a legacy-boot ESP).
func writeMBR(f *os.File, diskSize int64, esp part, hybrid bool) error {
	tbl := make([]byte, 66)
	sectors := diskSize / sector
	if hybrid {
		putMBREntry(tbl[0:16], 0x00, 0xEE, 1, esp.Start/sector-1)
		putMBREntry(tbl[16:32], 0x80, 0xEF, esp.Start/sector, esp.Size/sector)
	} else {
		putMBREntry(tbl[0:16], 0x00, 0xEE, 1, sectors-1)
	}
	tbl[64], tbl[65] = 0x55, 0xAA
	if _, err := f.WriteAt(tbl, 446); err != nil {
		return fmt.Errorf("writing the MBR: %w", err)
	}
	return nil
}

func putMBREntry(e []byte, status, typ byte, first, count int64) {
	if count > 0xFFFFFFFF {
		count = 0xFFFFFFFF
	}
	e[0] = status
	copy(e[1:4], chs(first))
	e[4] = typ
	copy(e[5:8], chs(first+count-1))
	binary.LittleEndian.PutUint32(e[8:], uint32(first))
	binary.LittleEndian.PutUint32(e[12:], uint32(count))
}

// chs encodes an LBA as cylinder/head/sector with 255 heads and 63 sectors per track, as sgdisk
// does; past cylinder 1023 it is the conventional maximum.
func chs(lba int64) []byte {
	const heads, sectors = 255, 63
	c := lba / (heads * sectors)
	if c > 1023 {
		return []byte{0xFE, 0xFF, 0xFF}
	}
	h := lba / sectors % heads
	s := lba%sectors + 1
	return []byte{byte(h), byte(s) | byte(c>>8)<<6, byte(c)}
}

// guidBytes encodes a GUID string in GPT's mixed-endian byte order.
func guidBytes(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		panic("flatcardisk: bad GUID " + s)
	}
	out := make([]byte, 16)
	binary.LittleEndian.PutUint32(out[0:], binary.BigEndian.Uint32(b[0:]))
	binary.LittleEndian.PutUint16(out[4:], binary.BigEndian.Uint16(b[4:]))
	binary.LittleEndian.PutUint16(out[6:], binary.BigEndian.Uint16(b[6:]))
	copy(out[8:], b[8:])
	return out
}
