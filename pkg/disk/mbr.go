package disk

import (
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// MBRKind tells what LBA 0 holds.
type MBRKind string

const (
	MBRNone       MBRKind = "none"
	MBRProtective MBRKind = "protective"
	MBRHybrid     MBRKind = "hybrid"
)

// MBRInfo describes the master boot record.
type MBRInfo struct {
	Kind  MBRKind   `json:"kind"`
	Types []string  `json:"types"` // partition type bytes in use, e.g. "ee", "ef"
	raw   [512]byte `json:"-"`
}

// ReadMBR classifies LBA 0: a protective MBR has a single 0xEE entry; a hybrid MBR (Flatcar before
// stable 4459.2.0) has 0xEE plus real entries such as the ESP, which newer Nova rejects.
func ReadMBR(s vdisk.Disk) (MBRInfo, error) {
	var info MBRInfo
	if n, err := s.ReadAt(info.raw[:], 0); n != 512 {
		return info, mbrReadError(err)
	}
	if info.raw[510] != 0x55 || info.raw[511] != 0xAA {
		info.Kind = MBRNone
		return info, nil
	}
	hasEE, others := false, 0
	for i := 0; i < 4; i++ {
		t := info.raw[446+16*i+4]
		if t == 0 {
			continue
		}
		info.Types = append(info.Types, fmt.Sprintf("%02x", t))
		if t == 0xEE {
			hasEE = true
		} else {
			others++
		}
	}
	switch {
	case hasEE && others == 0:
		info.Kind = MBRProtective
	case hasEE:
		info.Kind = MBRHybrid
	default:
		info.Kind = MBRNone
	}
	return info, nil
}

// WriteProtectiveMBR replaces the four MBR partition entries with the single 0xEE entry of a
// standard protective MBR, keeping the boot code (GRUB's boot.img still loads core.img from the
// BIOS-BOOT partition, as in Flatcar 4459.2.0).
func WriteProtectiveMBR(s vdisk.Disk) error {
	var mbr [512]byte
	if n, err := s.ReadAt(mbr[:], 0); n != 512 {
		return mbrReadError(err)
	}
	size := uint32(min(s.Size()/sectorSize-1, 0xFFFFFFFF))
	clear(mbr[446:510])
	e := mbr[446:462]
	e[0] = 0x00                           // not bootable
	e[1], e[2], e[3] = 0x00, 0x02, 0x00   // CHS start 0/0/2
	e[4] = 0xEE                           // GPT protective
	e[5], e[6], e[7] = 0xFF, 0xFF, 0xFF   // CHS end (max)
	e[8], e[9], e[10], e[11] = 1, 0, 0, 0 // first LBA 1
	e[12], e[13], e[14], e[15] = byte(size), byte(size>>8), byte(size>>16), byte(size>>24)
	mbr[510], mbr[511] = 0x55, 0xAA
	_, err := s.WriteAt(mbr[:], 0)
	return err
}

// mbrReadError keeps why sector 0 could not be read (a corrupt qcow2 says what it found).
func mbrReadError(err error) error {
	if rerr := vdisk.ReadFailure(err); rerr != nil {
		return fmt.Errorf("cannot read the MBR: %w", rerr)
	}
	return fmt.Errorf("cannot read the MBR: the image is shorter than one sector")
}
