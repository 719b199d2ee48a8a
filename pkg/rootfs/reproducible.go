package rootfs

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/ext4/crc"
	"github.com/google/uuid"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// The same inputs must give the same ROOT, byte for byte (a second CI runner's upload must find
// the first's Glance image identical). go-diskfs v1.9.4 takes the htree hash seed from
// google/uuid's random source and its times (superblock times, the times of the inodes it makes
// itself: lost+found, the journal, reserved inodes) from time.Now, with no parameter for either
// (docs/architecture.md says what upstream needs). So after it has written, the bake stamps the
// values it chose (stamps.apply): the hash seed derived from the filesystem UUID, and the epoch
// for every time at or after the bake's start. Without metadata_csum no checksum covers these
// fields but the superblock's own and each inode's.

// stamps are the values the bake gives what go-diskfs chose by itself.
type stamps struct {
	since    time.Time      // the bake's start: go-diskfs' time.Now stamps are at or after it
	epoch    time.Time      // what they become
	keep     map[int64]bool // the seconds the entries were given (kept as they are)
	hashSeed uuid.UUID      // the superblock's s_hash_seed
}

// hashSeed is the UUID google/uuid's NewRandom gives when it reads sha256(seed || counter) blocks
// (what go-diskfs' Create asked it for when the bake fed it that stream, so the bytes stay those).
func hashSeed(seed []byte) uuid.UUID {
	u, _ := uuid.NewRandomFromReader(&hashStream{seed: sha256.Sum256(append([]byte("flatcar-capo rootfs "), seed...))})
	return u
}

// hashStream is sha256(seed || counter) blocks.
type hashStream struct {
	seed [32]byte
	n    uint64
	buf  []byte
}

func (h *hashStream) Read(p []byte) (int, error) {
	for i := range p {
		if len(h.buf) == 0 {
			var b [40]byte
			copy(b[:], h.seed[:])
			binary.LittleEndian.PutUint64(b[32:], h.n)
			h.n++
			s := sha256.Sum256(b[:])
			h.buf = s[:]
		}
		p[i], h.buf = h.buf[0], h.buf[1:]
	}
	return len(p), nil
}

// rootTime is the time a bake writes when it is given none: the original ROOT's root directory
// time (a function of the input image), else now.
func rootTime(root Entry) time.Time {
	if !root.ModTime.IsZero() {
		return root.ModTime.UTC().Truncate(time.Second)
	}
	return time.Now().Truncate(time.Second)
}

// apply writes the hash seed into every superblock and rewrites every superblock time and inode
// creation time of the ext4 on dev to the epoch, and every other inode time at or after since
// (what go-diskfs stamped with time.Now) unless it is an entry's own mtime (keep).
func (st stamps) apply(dev vdisk.Disk) error {
	since, t, keep := st.since, st.epoch, st.keep
	sb := make([]byte, 1024)
	if _, err := dev.ReadAt(sb, 1024); err != nil {
		return fmt.Errorf("reading the new ROOT's superblock: %w", err)
	}
	le := binary.LittleEndian
	bs := int64(1024) << le.Uint32(sb[0x18:])
	firstData := int64(le.Uint32(sb[0x14:]))
	blocks := int64(le.Uint32(sb[0x04:])) | int64(le.Uint32(sb[0x150:]))<<32
	perGroup := int64(le.Uint32(sb[0x20:]))
	inodesPerGroup := int64(le.Uint32(sb[0x28:]))
	inodeSize := int64(le.Uint16(sb[0x58:]))
	is64 := le.Uint32(sb[0x60:])&0x80 != 0
	descSize := int64(32)
	if is64 {
		descSize = int64(le.Uint16(sb[0xFE:]))
	}
	if bs < 1024 || perGroup == 0 || inodeSize < 128 || descSize < 32 {
		return fmt.Errorf("the new ROOT's superblock is not as written (block size %d, %d blocks per group)", bs, perGroup)
	}
	groups := (blocks - firstData + perGroup - 1) / perGroup
	lo, hi := uint32(t.Unix()), byte(t.Unix()>>32)&3
	// Superblock times (write, mount, last check, mkfs) in the primary and every backup.
	sbAt := []int64{1024}
	for _, g := range backupGroups(groups) {
		sbAt = append(sbAt, (g*perGroup+firstData)*bs)
	}
	for _, off := range sbAt {
		b := make([]byte, 1024)
		if _, err := dev.ReadAt(b, off); err != nil {
			return err
		}
		if le.Uint16(b[0x38:]) != 0xEF53 {
			continue // no backup in this group
		}
		summed := le.Uint32(b[0x3FC:]) == crc.CRC32c(0xffffffff, b[:0x3FC])
		for _, f := range []int{0x2C, 0x30, 0x40, 0x108} {
			le.PutUint32(b[f:], lo)
		}
		for f := 0x274; f <= 0x277; f++ {
			b[f] = hi
		}
		copy(b[0xEC:0xFC], st.hashSeed[:])
		if summed {
			le.PutUint32(b[0x3FC:], crc.CRC32c(0xffffffff, b[:0x3FC]))
		}
		if _, err := dev.WriteAt(b, off); err != nil {
			return err
		}
	}
	// Inode times: atime, ctime, mtime, dtime, and crtime when the inode has room for it.
	gdt := (firstData + 1) * bs
	desc := make([]byte, descSize)
	table := make([]byte, inodesPerGroup*inodeSize)
	bitmap := make([]byte, bs)
	for g := int64(0); g < groups; g++ {
		if _, err := dev.ReadAt(desc, gdt+g*descSize); err != nil {
			return err
		}
		if le.Uint16(desc[0x12:])&0x1 != 0 { // INODE_UNINIT: no inode here
			continue
		}
		block := func(lo, hi int) int64 { // a block number, split in two fields on 64-bit
			n := int64(le.Uint32(desc[lo:]))
			if is64 && descSize >= 64 {
				n |= int64(le.Uint32(desc[hi:])) << 32
			}
			return n
		}
		at := block(0x08, 0x28)
		// Read the table only up to its last inode in use (the inode bitmap says): a 9 GiB ROOT
		// has 560 MB of inode tables, nearly all of them never touched.
		if _, err := dev.ReadAt(bitmap, block(0x04, 0x24)*bs); err != nil && err != io.EOF {
			return err
		}
		used := int64(0)
		for i := min(inodesPerGroup, int64(len(bitmap))*8) - 1; i >= 0; i-- {
			if bitmap[i/8]&(1<<(i%8)) != 0 {
				used = i + 1
				break
			}
		}
		if used == 0 {
			continue
		}
		if _, err := dev.ReadAt(table[:used*inodeSize], at*bs); err != nil && err != io.EOF {
			return err
		}
		for i := int64(0); i < used; i++ {
			ino := table[i*inodeSize : (i+1)*inodeSize]
			if le.Uint16(ino[0:]) == 0 && le.Uint16(ino[0x1A:]) == 0 && le.Uint32(ino[0x0C:]) == 0 {
				continue // never used
			}
			changed := false
			set := func(off, extra int) {
				v := int64(le.Uint32(ino[off:]))
				if extra >= 0 {
					v |= int64(le.Uint32(ino[extra:])&3) << 32
				}
				// In the epoch's own second, go-diskfs' stamp differs only in its nanoseconds
				// (the bake ran within a second of the base image being made): clear them too.
				if v == 0 || v != t.Unix() && off != 0x90 && (v < since.Unix() || keep[v]) {
					return
				}
				le.PutUint32(ino[off:], lo)
				if extra >= 0 {
					le.PutUint32(ino[extra:], uint32(hi))
				}
				changed = true
			}
			extraSize := 0
			if inodeSize > 128 {
				extraSize = int(le.Uint16(ino[0x80:]))
			}
			has := func(end int) bool { return inodeSize > 128 && 0x80+extraSize >= end }
			ex := func(off, end int) int {
				if has(end) {
					return off
				}
				return -1
			}
			set(0x08, ex(0x8C, 0x90)) // atime
			set(0x0C, ex(0x84, 0x88)) // ctime
			set(0x10, ex(0x88, 0x8C)) // mtime
			set(0x14, -1)             // dtime
			if has(0x98) {
				set(0x90, 0x94) // crtime
			}
			if changed {
				// go-diskfs checks every inode's crc32c, metadata_csum or not.
				seed := le.Uint32(sb[0x270:])
				if seed == 0 && le.Uint32(sb[0x64:])&0x400 != 0 {
					seed = crc.CRC32c(0xffffffff, sb[0x68:0x78])
				}
				number := uint32(g*inodesPerGroup + i + 1)
				ino[0x7C], ino[0x7D] = 0, 0
				if inodeSize > 128 {
					ino[0x82], ino[0x83] = 0, 0
				}
				var nb [4]byte
				le.PutUint32(nb[:], number)
				sum := crc.CRC32c(seed, nb[:])
				sum = crc.CRC32c(sum, ino[0x64:0x68]) // i_generation
				sum = crc.CRC32c(sum, ino)
				le.PutUint16(ino[0x7C:], uint16(sum))
				if inodeSize > 128 {
					le.PutUint16(ino[0x82:], uint16(sum>>16))
				}
				if _, err := dev.WriteAt(ino, at*bs+i*inodeSize); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Epoch is the time a bake of img writes when it is given none (its ROOT's own time), for what a
// build makes around the bake (the sysext, the OEM edit) to share it.
func Epoch(img *disk.Image) (time.Time, error) {
	part, err := findRoot(img)
	if err != nil {
		return time.Time{}, err
	}
	old, err := disk.OpenExt4(img.Section(part), disk.PartitionName(part))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: partition 9 (ROOT) is not a readable ext4 filesystem (%v)", img.Path, err)
	}
	root, _, err := statEntry(old, ".")
	if err != nil {
		return time.Time{}, err
	}
	return rootTime(root), nil
}
