package rootfs

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// partitionName is the GPT name of Flatcar's ROOT partition (number 9).
const partitionName = "ROOT"

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

// Bake replaces the ROOT of the writable image img with a fresh ext4 holding the original ROOT's
// entries plus added (an added entry replaces an original one of the same path and type;
// missing parent directories are created 0755 root:root). Everything the bake makes, and added
// entries without a ModTime, get epoch (zero: the original ROOT's own time), so the same inputs
// give the same bytes (reproducible.go). The original ROOT is read from where it stays intact
// while the new one is written: the base of a copy-on-write overlay (a build's work copy, which
// must not have been written within ROOT), else a sparse copy set aside next to the raw image
// file (a few MiB for a release image). Everything that can be refused is refused before img is
// written; a failure while writing leaves its ROOT unusable, so img must be a copy the caller
// discards on error.
func Bake(ctx context.Context, img *disk.Image, added []Entry, epoch time.Time) (*Result, error) {
	start := time.Now()
	part, err := findRoot(img)
	if err != nil {
		return nil, err
	}
	old, clear, done, err := oldRoot(ctx, img, part)
	if err != nil {
		return nil, err
	}
	defer done()
	pl, err := newPlan(img.Path, old, disk.PartitionName(part), added, epoch)
	if err != nil {
		return nil, err
	}
	res, err := pl.write(ctx, img, part, clear)
	if err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// oldRoot is img's ROOT as it was, to read while img's own is rewritten, and clear, which makes
// img's ROOT read as zeros; done removes what was set aside.
func oldRoot(ctx context.Context, img *disk.Image, part disk.Partition) (old vdisk.Disk, clear func(off, n int64) error, done func(), err error) {
	if ov, ok := img.Disk.(*vdisk.Overlay); ok {
		if ov.Touched(part.Start, part.Size) {
			return nil, nil, nil, fmt.Errorf("%s: ROOT was already changed in this work copy; bake before other edits", img.Path)
		}
		return vdisk.NewSection(ov.Base(), part.Start, part.Size), ov.Discard, func() {}, nil
	}
	f := img.File()
	if f == nil || !img.Writable {
		return nil, nil, nil, fmt.Errorf("%s: the ROOT bake writes a raw image opened for writing (this is a %s image)", img.Path, img.Format)
	}
	aside, err := os.CreateTemp(filepath.Dir(img.Path), ".rootfs-old-ROOT-*")
	if err != nil {
		return nil, nil, nil, err
	}
	done = func() {
		aside.Close()
		os.Remove(aside.Name())
	}
	// Only ROOT's data ranges are read, and its all-zero blocks stay holes.
	if err := qcow2.CopyToRaw(ctx, img.Section(part), aside, 0, nil); err != nil {
		done()
		return nil, nil, nil, fmt.Errorf("copying the original ROOT aside: %w", err)
	}
	if old, err = vdisk.NewFile(aside, false); err != nil {
		done()
		return nil, nil, nil, err
	}
	return old, func(off, n int64) error { return vdisk.ZeroRange(f, off, n) }, done, nil
}

func findRoot(img *disk.Image) (disk.Partition, error) {
	part, err := img.FindPartition(partitionName)
	if err != nil {
		return part, fmt.Errorf("%w (the bake writes into partition 9, ROOT)", err)
	}
	return part, nil
}

// plan is everything read and decided before the first write.
type plan struct {
	src      string
	root     Entry
	carried  int
	added    int
	entries  []Entry
	replaced []string
	uuid     *uuid.UUID
	epoch    time.Time // the time of everything the bake makes (reproducible.go)
}

// newPlan reads the original ROOT (the partition's bytes, dev, which part names in errors) and
// merges added into it; epoch is the time of what the bake makes (zero: the original ROOT's).
func newPlan(name string, dev vdisk.Disk, part string, added []Entry, epoch time.Time) (*plan, error) {
	old, err := disk.OpenExt4(dev, part)
	if err != nil {
		return nil, fmt.Errorf("%s: partition 9 (ROOT) is not a readable ext4 filesystem (%v); is this a Flatcar image?", name, err)
	}
	root, carried, err := readTree(old)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ep := epoch
	if ep.IsZero() {
		ep = rootTime(root)
	}
	entries, replaced, err := merge(carried, added, ep)
	if err != nil {
		return nil, err
	}
	fsUUID, err := rootUUID(dev)
	if err != nil {
		return nil, err
	}
	return &plan{src: name, root: root, carried: len(carried), added: len(added), entries: entries, replaced: replaced, uuid: fsUUID, epoch: ep}, nil
}

// write makes the fresh ROOT in img's ROOT partition part (made to read as zeros first with
// zero) and verifies it by reading it back. Everything it refuses (the entries do not fit) is
// refused before the first write.
func (pl *plan) write(ctx context.Context, img *disk.Image, part disk.Partition, zero func(off, n int64) error) (*Result, error) {
	name := img.Path
	need, err := capacity(part.Size, pl.entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; grow partition 9 (ROOT) of the image first, or add less", pl.src, err)
	}
	if err := zero(part.Start, part.Size); err != nil {
		return nil, fmt.Errorf("clearing ROOT in %s: %w", name, err)
	}
	section := img.Section(part)
	// ROOT reads as zeros now: Create's zero inode tables need not be written (zeroSkip).
	zs := &zeroSkip{Disk: section, on: true}
	st := stamps{since: time.Now().Truncate(time.Second), epoch: pl.epoch, keep: map[int64]bool{pl.root.ModTime.Unix(): true},
		hashSeed: hashSeed(append(pl.uuid[:], fmt.Sprint(part.Size)...))}
	nfs, err := disk.CreateExt4(zs, disk.PartitionName(part), mkfsParams(pl.uuid))
	if err != nil {
		return nil, fmt.Errorf("making the new ROOT filesystem: %w", err)
	}
	zs.on, zs.written = false, nil
	sums, err := populate(ctx, nfs, pl.root, pl.entries)
	if err != nil {
		return nil, fmt.Errorf("writing the new ROOT: %w", err)
	}
	for _, e := range pl.entries {
		st.keep[e.ModTime.Unix()] = true
	}
	if err := st.apply(section); err != nil {
		return nil, fmt.Errorf("setting the new ROOT's times: %w", err)
	}
	// Read back through a fresh reader, not the writer's state.
	check, err := disk.OpenExt4(section, disk.PartitionName(part))
	if err != nil {
		return nil, fmt.Errorf("reading the new ROOT back: %w", err)
	}
	if err := verify(check, pl.root, pl.entries, sums); err != nil {
		return nil, err
	}
	res := &Result{Output: name, Partition: part.Number, RootBytes: part.Size, NeedBytes: need,
		Carried: pl.carried, Added: pl.added, Replaced: pl.replaced, UUID: pl.uuid.String(), SkippedZero: zs.skipped}
	for _, e := range pl.entries {
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
			} else if !ok {
				byPath[d] = len(entries)
				entries = append(entries, Entry{Path: d, Mode: fs.ModeDir | 0o755, ModTime: now})
			}
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
func rootUUID(dev vdisk.Disk) (*uuid.UUID, error) {
	sb := make([]byte, 1024)
	if _, err := dev.ReadAt(sb, 1024); err != nil {
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

// zeroSkip passes writes to a device whose whole range reads as zeros (ROOT after vdisk.ZeroRange),
// except all-zero writes to bytes not written since: those would change nothing. go-diskfs's
// Create writes the inode tables as zeros (hundreds of MiB for a Flatcar ROOT); skipping them
// keeps the image sparse and the bake fast. A zero write that overlaps anything written before
// is passed through, so the device's content is exactly what it would be without skipping.
type zeroSkip struct {
	vdisk.Disk
	on      bool
	written vdisk.Ranges
	skipped int64
}

func (z *zeroSkip) WriteAt(p []byte, off int64) (int, error) {
	if !z.on {
		return z.Disk.WriteAt(p, off)
	}
	end := off + int64(len(p))
	if vdisk.IsZero(p) && !z.written.Overlaps(off, end) {
		z.skipped += int64(len(p))
		return len(p), nil
	}
	n, err := z.Disk.WriteAt(p, off)
	z.written.Add(off, off+int64(n))
	return n, err
}
