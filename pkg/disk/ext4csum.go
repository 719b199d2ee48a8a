package disk

import (
	"encoding/binary"
	"fmt"

	"github.com/diskfs/go-diskfs/filesystem/ext4/crc"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// go-diskfs' ext4 reader checks metadata checksums whether or not the filesystem keeps them: it
// refuses a superblock whose checksum type is not crc32c and an inode whose checksum does not
// match, even when the metadata_csum feature is off. Such a filesystem (made with
// -O ^metadata_csum, or by an older mkfs) never has valid checksums, and e2fsprogs does not
// maintain them after an edit: the reader then failed on every inode and /opt vanished from
// inspect's report and SBOM. The rule here: checksums are verified only where the filesystem
// claims them. With metadata_csum on, the reader sees the disk as it is (and verifies); with it
// off, it reads through noChecksums, which shows the superblock's checksum type as crc32c and
// each inode read with the checksum the reader computes, so nothing is verified that the
// filesystem does not keep (its directory blocks are read without checksums already).

const roCompatMetadataCsum = 0x400

// noChecksums is dev as go-diskfs must see an ext4 filesystem without metadata_csum. Writes go
// to dev unchanged.
type noChecksums struct {
	vdisk.Disk
	blockSize, inodeSize, inodesPerGroup uint64
	seed                                 uint32
	tables                               []uint64 // each group's inode table, in bytes from the start
}

// withoutChecksums returns dev itself when the ext4 filesystem on it keeps metadata checksums,
// else the view that does not verify them. checkExt4 has bounded the superblock's sizes.
func withoutChecksums(dev vdisk.Disk) (vdisk.Disk, error) {
	sb := make([]byte, 1024)
	if _, err := dev.ReadAt(sb, 1024); err != nil {
		return nil, fmt.Errorf("the superblock cannot be read: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint32(sb[0x64:])&roCompatMetadataCsum != 0 {
		return dev, nil
	}
	v := &noChecksums{Disk: dev, blockSize: 1024 << le.Uint32(sb[0x18:]), inodeSize: uint64(le.Uint16(sb[0x58:])),
		inodesPerGroup: uint64(le.Uint32(sb[0x28:])), seed: le.Uint32(sb[0x270:])}
	if v.inodeSize < 0x84 { // 128-byte inodes have no checksum field the reader reads whole
		return dev, nil
	}
	blocks, first, perGroup := uint64(le.Uint32(sb[0x4:])), uint64(le.Uint32(sb[0x14:])), uint64(le.Uint32(sb[0x20:]))
	descSize := uint64(32)
	if le.Uint32(sb[0x60:])&0x80 != 0 { // INCOMPAT_64BIT
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
		descSize = max(32, uint64(le.Uint16(sb[0xFE:])))
	}
	groups := (blocks - first + perGroup - 1) / perGroup
	gdt := make([]byte, groups*descSize)
	if _, err := dev.ReadAt(gdt, int64((first+1)*v.blockSize)); err != nil {
		return nil, fmt.Errorf("the group descriptors cannot be read: %w", err)
	}
	for g := range groups {
		d := gdt[g*descSize:]
		table := uint64(le.Uint32(d[0x8:]))
		if descSize >= 64 {
			table |= uint64(le.Uint32(d[0x28:])) << 32
		}
		v.tables = append(v.tables, table*v.blockSize)
	}
	return v, nil
}

func (v *noChecksums) ReadAt(p []byte, off int64) (int, error) {
	n, err := v.Disk.ReadAt(p, off)
	got := p[:n]
	if i := 1024 + 0x175 - off; i >= 0 && i < int64(n) && got[i] == 0 {
		got[i] = 1 // s_checksum_type crc32c: the reader refuses 0, and nothing is checked with it
	}
	if uint64(n) == v.inodeSize { // the reader reads one inode at a time
		v.inode(got, uint64(off))
	}
	return n, err
}

// inode gives the inode in b, read at off, the checksum the reader computes, if off is an inode.
func (v *noChecksums) inode(b []byte, off uint64) {
	for g, t := range v.tables {
		end := t + v.inodesPerGroup*v.inodeSize
		if off < t || off >= end || (off-t)%v.inodeSize != 0 {
			continue
		}
		number := uint32(uint64(g)*v.inodesPerGroup + (off-t)/v.inodeSize + 1)
		le := binary.LittleEndian
		b[0x7c], b[0x7d], b[0x82], b[0x83] = 0, 0, 0, 0
		var num, gen [4]byte
		le.PutUint32(num[:], number)
		copy(gen[:], b[0x64:0x68])
		sum := crc.CRC32c(crc.CRC32c(crc.CRC32c(v.seed, num[:]), gen[:]), b)
		le.PutUint16(b[0x7c:], uint16(sum))
		le.PutUint16(b[0x82:], uint16(sum>>16))
		return
	}
}
