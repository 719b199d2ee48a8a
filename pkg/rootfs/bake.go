package rootfs

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/google/uuid"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// PartitionName is the GPT name of Flatcar's ROOT partition (number 9).
const PartitionName = "ROOT"

// Result reports what Bake did.
type Result struct {
	Output      string        `json:"output"`
	Partition   int           `json:"partition"`
	RootBytes   int64         `json:"rootBytes"`
	NeedBytes   int64         `json:"estimatedBytes"`
	Carried     int           `json:"carried"`  // entries taken from the original ROOT
	Added       int           `json:"added"`    // entries added or replaced
	Replaced    []string      `json:"replaced"` // original entries that an added entry replaced
	UUID        string        `json:"uuid"`
	Duration    time.Duration `json:"durationNs"`
	WrittenData int64         `json:"writtenBytes"`     // file content written into the new ROOT
	SkippedZero int64         `json:"skippedZeroBytes"` // zero metadata not written over ROOT's zeros
}

// Bake writes dst: a copy of the raw image src whose ROOT is a fresh ext4 holding the original
// ROOT's entries plus added (an added entry replaces an original one of the same path and type;
// missing parent directories are created 0755 root:root). src is only read. dst appears only
// when complete and verified; on any failure nothing is left behind. Added entries without a
// ModTime get the time Bake starts.
func Bake(ctx context.Context, src, dst string, added []Entry) (*Result, error) {
	start := time.Now()
	in, err := disk.Open(src, false)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if in.Format != disk.FormatRaw {
		return nil, fmt.Errorf("%s is a %s image; the ROOT bake works on a raw image: convert it first with 'flatcar-capo convert %s OUT.raw'", src, in.Format, src)
	}
	part, err := in.FindPartition(PartitionName)
	if err != nil {
		return nil, fmt.Errorf("%w (the bake writes into partition 9, ROOT)", err)
	}
	old, err := ext4.Read(disk.Backend(in.Section(part)), part.Size, 0, 512)
	if err != nil {
		return nil, fmt.Errorf("%s: partition %d (ROOT) is not a readable ext4 filesystem (%v); is this a Flatcar image?", src, part.Number, err)
	}
	root, carried, err := readTree(old)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	entries, replaced, err := merge(carried, added, start)
	if err != nil {
		return nil, err
	}
	need, err := capacity(part.Size, entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; grow partition 9 (ROOT) of the image first, or add less", src, err)
	}
	fsUUID, err := rootUUID(in, part)
	if err != nil {
		return nil, err
	}

	out, err := atomicfile.Create(dst)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	if err := disk.CopySparse(ctx, out.File, in.File()); err != nil {
		return nil, fmt.Errorf("copying %s: %w", src, err)
	}
	if err := zeroRange(out.File, part.Start, part.Size); err != nil {
		return nil, fmt.Errorf("clearing ROOT in the copy: %w", err)
	}
	st, err := out.Stat()
	if err != nil {
		return nil, err
	}
	section := disk.NewSection(fileStorage{out.File, st.Size()}, part.Start, part.Size)
	// ROOT reads as zeros now: Create's zero inode tables need not be written (zeroskip.go).
	zs := &zeroSkip{Device: section, on: true}
	nfs, err := ext4.Create(disk.Backend(zs), part.Size, 0, 512, mkfsParams(fsUUID))
	if err != nil {
		return nil, fmt.Errorf("making the new ROOT filesystem: %w", err)
	}
	zs.on, zs.written = false, nil
	sums, err := populate(ctx, nfs, root, entries)
	if err != nil {
		return nil, fmt.Errorf("writing the new ROOT: %w", err)
	}
	// Read back through a fresh reader, not the writer's state.
	check, err := ext4.Read(disk.Backend(section), part.Size, 0, 512)
	if err != nil {
		return nil, fmt.Errorf("reading the new ROOT back: %w", err)
	}
	if err := verify(check, root, entries, sums); err != nil {
		return nil, err
	}
	if err := out.Commit(0o644); err != nil {
		return nil, err
	}
	res := &Result{Output: dst, Partition: part.Number, RootBytes: part.Size, NeedBytes: need,
		Carried: len(carried), Added: len(added), Replaced: replaced, UUID: fsUUID.String(), Duration: time.Since(start),
		SkippedZero: zs.skipped}
	for _, e := range entries {
		if e.IsRegular() {
			res.WrittenData += e.Size
		}
	}
	return res, nil
}

// merge combines the original entries with the added ones, sorted parents first.
func merge(carried, added []Entry, now time.Time) (entries []Entry, replaced []string, err error) {
	byPath := map[string]int{}
	for i, e := range carried {
		byPath[e.Path] = i
	}
	entries = append([]Entry{}, carried...)
	addDir := func(p string) {
		if _, ok := byPath[p]; !ok {
			byPath[p] = len(entries)
			entries = append(entries, Entry{Path: p, Mode: fs.ModeDir | 0o755, ModTime: now})
		}
	}
	for _, a := range added {
		p, err := cleanPath(a.Path)
		if err != nil {
			return nil, nil, err
		}
		a.Path = p
		if err := a.validate(); err != nil {
			return nil, nil, err
		}
		if a.ModTime.IsZero() {
			a.ModTime = now
		}
		for d := parentOf(p); d != ""; d = parentOf(d) {
			if i, ok := byPath[d]; ok && !entries[i].IsDir() {
				return nil, nil, fmt.Errorf("cannot add /%s: /%s is not a directory in ROOT", p, d)
			}
			addDir(d)
		}
		if i, ok := byPath[p]; ok {
			if entries[i].IsDir() != a.IsDir() {
				return nil, nil, fmt.Errorf("cannot add /%s: ROOT already has it as a %s", p, kind(entries[i]))
			}
			if i < len(carried) {
				replaced = append(replaced, "/"+p)
			}
			entries[i] = a
			continue
		}
		byPath[p] = len(entries)
		entries = append(entries, a)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return entries, replaced, nil
}

func kind(e Entry) string {
	switch {
	case e.IsDir():
		return "directory"
	case e.IsSymlink():
		return "symlink"
	}
	return "file"
}

// rootUUID keeps the original filesystem UUID (units or fstab may name it), read from the ext4
// superblock (offset 1024, UUID at 0x68).
func rootUUID(in *disk.Image, p disk.Partition) (*uuid.UUID, error) {
	sb := make([]byte, 1024)
	if _, err := in.ReadAt(sb, p.Start+1024); err != nil {
		return nil, fmt.Errorf("reading the ROOT superblock: %w", err)
	}
	u, err := uuid.FromBytes(sb[0x68 : 0x68+16])
	if err != nil {
		return nil, err
	}
	if u == uuid.Nil {
		u = uuid.New()
	}
	return &u, nil
}

// fileStorage is the output file as disk.Storage (the section bounds every write to ROOT).
type fileStorage struct {
	*os.File
	size int64
}

func (f fileStorage) Size() int64  { return f.size }
func (f fileStorage) Close() error { return nil }
