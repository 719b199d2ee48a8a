package vdisk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// File is a raw image file as a Disk; its holes are found with SEEK_DATA/SEEK_HOLE.
type File struct {
	f        *os.File
	size     int64
	writable bool
}

// NewFile wraps an open raw image file (the caller keeps ownership of f unless it calls Close);
// writable allows WriteAt.
func NewFile(f *os.File, writable bool) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &File{f: f, size: st.Size(), writable: writable}, nil
}

func (r *File) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r *File) WriteAt(p []byte, off int64) (int, error) {
	if !r.writable {
		return 0, ErrReadOnly
	}
	return r.f.WriteAt(p, off)
}
func (r *File) Size() int64 { return r.size }

// Close syncs a writable file, then closes it.
func (r *File) Close() error {
	if r.writable {
		if err := r.f.Sync(); err != nil {
			r.f.Close()
			return err
		}
	}
	return r.f.Close()
}

// Extents walks the file's data ranges; a file system without SEEK_DATA yields one range.
func (r *File) Extents(ctx context.Context, fn func(off, n int64) error) error {
	return DataRanges(ctx, r.f, 0, r.size, fn)
}

// DataRanges is the one sparse walker: it calls fn for each data range of f within [off, end),
// clipped to it, as SEEK_DATA/SEEK_HOLE report them; where the file system has no SEEK_DATA the
// whole range is one data range.
func DataRanges(ctx context.Context, f *os.File, off, end int64, fn func(off, n int64) error) error {
	fd := int(f.Fd())
	for pos := off; pos < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		start, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			if pos == off {
				return fn(off, end-off)
			}
			return fmt.Errorf("SEEK_DATA on %s stopped working: %w", f.Name(), err)
		}
		if err != nil {
			return fmt.Errorf("finding data in %s: %w", f.Name(), err)
		}
		if start >= end {
			return nil
		}
		stop, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("finding holes in %s: %w", f.Name(), err)
		}
		stop = min(stop, end)
		if stop > start {
			if err := fn(start, stop-start); err != nil {
				return err
			}
		}
		pos = stop
	}
	return nil
}

// ZeroRange makes [off, off+n) of f read as zeros: a punched hole where the file system can
// (nothing is stored and old data does not linger), else written zeros.
func ZeroRange(f *os.File, off, n int64) error {
	if unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n) == nil {
		return nil
	}
	_, err := io.CopyN(io.NewOffsetWriter(f, off), Zeros{}, n)
	return err
}

// PunchZeros turns every all-zero, block-aligned block in f's data ranges into a hole and
// returns how many bytes it freed; the file reads the same afterwards. A raw image another tool
// wrote without holes (packer's copy of its disk) becomes as sparse as its content, so the
// qcow2 made from it does not store gigabytes of zeros.
func PunchZeros(ctx context.Context, f *os.File, block int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var punched, runStart, runEnd int64 = 0, -1, -1
	flush := func() error {
		if runStart < 0 {
			return nil
		}
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, runStart, runEnd-runStart); err != nil {
			return fmt.Errorf("making %s sparse: %w", f.Name(), err)
		}
		punched += runEnd - runStart
		runStart, runEnd = -1, -1
		return nil
	}
	err = DataRanges(ctx, f, 0, st.Size(), func(off, n int64) error {
		// Whole blocks only: a partial block at either end keeps its data.
		lo, hi := (off+block-1)/block*block, (off+n)/block*block
		for pos := lo; pos < hi; {
			if err := ctx.Err(); err != nil {
				return err
			}
			chunk := buf[:min(int64(len(buf)), hi-pos)]
			if _, err := f.ReadAt(chunk, pos); err != nil {
				return fmt.Errorf("reading %s: %w", f.Name(), err)
			}
			for i := int64(0); i < int64(len(chunk)); i += block {
				at := pos + i
				if !IsZero(chunk[i:min(i+block, int64(len(chunk)))]) {
					if err := flush(); err != nil {
						return err
					}
					continue
				}
				if runStart < 0 {
					runStart = at
				}
				runEnd = min(at+block, hi)
			}
			pos += int64(len(chunk))
		}
		return flush()
	})
	if err != nil {
		return punched, err
	}
	return punched, flush()
}
