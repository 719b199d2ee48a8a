package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// MBRKind tells what LBA 0 holds.
type MBRKind string

const (
	mbrNone       MBRKind = "none"
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
		info.Kind = mbrNone
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
		info.Kind = mbrNone
	}
	return info, nil
}

// WriteProtectiveMBR replaces the four MBR partition entries with the single 0xEE entry of a
// protective MBR as the UEFI specification (5.2.3, "Protective MBR") lays it out: not bootable,
// starting CHS 0x000200, OSType 0xEE, ending CHS that of the disk's last block (0xFFFFFF when CHS
// cannot hold it), StartingLBA 1, SizeInLBA the disk's size minus one (0xFFFFFFFF when larger),
// the other three entries and the unique disk signature zero, 0xAA55 last. The boot code (0..439)
// is kept: GRUB's boot.img still loads core.img from the BIOS-BOOT partition, as in Flatcar
// 4459.2.0.
func WriteProtectiveMBR(s vdisk.Disk) error {
	var mbr [512]byte
	if n, err := s.ReadAt(mbr[:], 0); n != 512 {
		return mbrReadError(err)
	}
	sectors := s.Size() / sectorSize
	size := uint32(min(sectors-1, 0xFFFFFFFF))
	clear(mbr[440:510])
	e := mbr[446:462]
	e[0] = 0x00                         // not bootable
	e[1], e[2], e[3] = 0x00, 0x02, 0x00 // starting CHS: LBA 1
	e[4] = 0xEE                         // GPT protective
	copy(e[5:8], protectiveCHS(sectors-1))
	binary.LittleEndian.PutUint32(e[8:12], 1) // StartingLBA
	binary.LittleEndian.PutUint32(e[12:16], size)
	mbr[510], mbr[511] = 0x55, 0xAA
	_, err := s.WriteAt(mbr[:], 0)
	return err
}

// protectiveCHS is the CHS address of lba in the geometry partitioning tools assume (255 heads,
// 63 sectors a track), or 0xFFFFFF, the UEFI specification's value when CHS cannot hold it.
func protectiveCHS(lba int64) []byte {
	const heads, sectors = 255, 63
	c := lba / (heads * sectors)
	if c > 1023 {
		return []byte{0xFF, 0xFF, 0xFF}
	}
	h, sec := lba/sectors%heads, lba%sectors+1
	return []byte{byte(h), byte(sec) | byte(c>>8)<<6, byte(c)}
}

// HybridMBRAdvice says what a hybrid MBR in the image at path means for OpenStack and how to
// fix it; convert, upload and inspect say it.
func HybridMBRAdvice(path string) string {
	return fmt.Sprintf("%s has a hybrid MBR (Flatcar LTS 4081 and releases before 4459.2.0): Glance 2026.2 refuses such images "+
		"by default (its GPT/MBR safety check) and Nova's image inspection rejects them (Launchpad bug 2091114); fix: "+
		"flatcar-capo oem set %s --id openstack --protective-mbr (flatcar-capo build writes the protective MBR itself)", path, path)
}

// mbrReadError keeps why sector 0 could not be read (a corrupt qcow2 says what it found).
func mbrReadError(err error) error {
	if rerr := vdisk.ReadFailure(err); rerr != nil {
		return fmt.Errorf("cannot read the MBR: %w", rerr)
	}
	return fmt.Errorf("cannot read the MBR: the image is shorter than one sector")
}
