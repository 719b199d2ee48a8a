package rootfs

import (
	"fmt"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/google/uuid"
)

// Flatcar makes ROOT with `mke2fs -t ext4 -b 4096 -i 4096 -I 256` (label ROOT). go-diskfs v1.9.4
// gives the same block size, inode ratio and inode size, and ext4's has_journal, extent, 64bit,
// flex_bg, sparse_super, large_file, huge_file, ext_attr, filetype. Left out on purpose:
//   - resize_inode: go-diskfs lays out reserved GDT blocks for 4 KiB blocks that offline resize2fs
//     then reports as a wrong inode 7 size. Without it the kernel's online grow (Flatcar's first
//     boot) converts the filesystem to meta_bg when the descriptor table needs another block.
//   - metadata_csum: go-diskfs writes wrong extent-block checksums for files of many extents.
//   - dir_index: go-diskfs corrupts htree directories it adds to; linear directories are valid
//     ext4 and the kernel indexes nothing it does not need to.
const (
	blockSize  = 4096
	inodeRatio = 4096
	inodeSize  = 256
	label      = "ROOT"
)

func mkfsParams(fsUUID *uuid.UUID) *ext4.Params {
	return &ext4.Params{
		UUID:            fsUUID,
		SectorsPerBlock: blockSize / 512,
		InodeRatio:      inodeRatio,
		VolumeName:      label,
		Features: []ext4.FeatureOpt{
			ext4.WithFeatureReservedGDTBlocksForExpansion(false),
			ext4.WithFeatureMetadataChecksums(false),
			ext4.WithFeatureDirectoryIndices(false),
		},
	}
}

// capacity estimates whether entries fit a fresh ROOT of size bytes, before anything is written:
// the fixed overhead go-diskfs lays out (inode tables, bitmaps, group descriptors and superblock
// backups, journal) plus each entry's data and directory blocks, with a margin for extent-tree
// blocks. It returns the bytes needed.
func capacity(size int64, entries []Entry) (need int64, err error) {
	blocks := size / blockSize
	if blocks < 2048 {
		return 0, fmt.Errorf("ROOT is %d KiB; a Flatcar ROOT needs at least 8 MiB", size/1024)
	}
	const blocksPerGroup = 32768
	groups := (blocks + blocksPerGroup - 1) / blocksPerGroup
	inodes := blocks * blockSize / inodeRatio
	overhead := inodes*inodeSize/blockSize + 2*groups // inode tables, block and inode bitmaps
	overhead += 2 * (1 + (groups*64+blockSize-1)/blockSize) * int64(1+len(backupGroups(groups)))
	overhead += max(1024, min(102400, blocks/32)) // journal, as go-diskfs sizes it
	data := int64(1)                              // root directory
	dirEntries := map[string]int64{}
	for _, e := range entries {
		dirEntries[parentOf(e.Path)] += int64(8 + (len(baseOf(e.Path))+3)/4*4)
		switch {
		case e.IsDir():
			data++
		case e.IsSymlink():
			if len(e.Target) >= 60 {
				data++
			}
		case e.IsRegular():
			b := (e.Size + blockSize - 1) / blockSize
			data += b + b/256 + 1 // extent-tree blocks for fragmented files
		}
	}
	for _, n := range dirEntries {
		data += n / blockSize // blocks beyond each directory's first
	}
	if int64(len(entries))+11 > inodes {
		return 0, fmt.Errorf("ROOT has room for %d inodes but %d entries are needed", inodes, len(entries)+11)
	}
	need = (overhead + data + data/100) * blockSize
	if need > size {
		return need, fmt.Errorf("ROOT is %s but the carried and added files need about %s (%s of them filesystem overhead)",
			mib(size), mib(need), mib(overhead*blockSize))
	}
	return need, nil
}

// backupGroups are the groups holding superblock backups with sparse_super: 1 and powers of 3, 5, 7.
func backupGroups(groups int64) []int64 {
	var out []int64
	for _, base := range []int64{3, 5, 7} {
		for g := int64(1); g < groups; g *= base {
			if base != 3 && g == 1 {
				continue
			}
			out = append(out, g)
		}
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
