package btrfs

import (
	"errors"
	"fmt"
	"io"
)

// blockWrite is one copy of one edited leaf, with the bytes it replaces for a roll-back.
type blockWrite struct {
	logical  uint64
	phys     int64
	new, old []byte
}

// commit encodes and re-validates every edited leaf, then writes each copy of each leaf. If a
// write fails, the copies already written are put back as they were.
func (w *writePlan) commit(dev io.WriterAt) error {
	fs := w.fs
	var writes []blockWrite
	for _, l := range w.leaves {
		buf, err := l.encode()
		if err != nil {
			return err
		}
		if l.orig.logical != fs.fsTree.logical {
			// The parent node keys each child by its first item; we do not touch nodes.
			if len(l.items) == 0 {
				return unsupportedf("%v would become empty; removing a leaf is out of reach", l)
			}
			if l.items[0].key != l.orig.keys[0] {
				return unsupportedf("%v would get a new first key (%v instead of %v); updating its parent node is out of reach", l, l.items[0].key, l.orig.keys[0])
			}
		}
		if _, err := fs.parseBlock(l.orig.logical, buf); err != nil {
			return fmt.Errorf("internal error, edited %v does not verify: %w", l, err)
		}
		phys, err := fs.physical(l.orig.logical, len(buf))
		if err != nil {
			return err
		}
		for _, p := range phys {
			old := make([]byte, len(buf))
			if err := readFull(fs.dev, old, p); err != nil {
				return fmt.Errorf("reading %v at device offset %d before writing it: %w", l, p, err)
			}
			writes = append(writes, blockWrite{l.orig.logical, p, buf, old})
		}
	}
	for i, wr := range writes {
		if _, err := dev.WriteAt(wr.new, wr.phys); err != nil {
			err = fmt.Errorf("writing tree block %d at device offset %d: %w", wr.logical, wr.phys, err)
			return errors.Join(err, rollback(dev, writes[:i+1]))
		}
	}
	return nil
}

// rollback restores the original bytes of blocks written so far; the last one may have failed
// without writing anything, so only failures on the earlier ones are reported.
func rollback(dev io.WriterAt, done []blockWrite) error {
	var errs []error
	for i := len(done) - 1; i >= 0; i-- {
		if _, err := dev.WriteAt(done[i].old, done[i].phys); err != nil && i < len(done)-1 {
			errs = append(errs, fmt.Errorf("restoring tree block %d at device offset %d failed, the filesystem may be inconsistent: %w", done[i].logical, done[i].phys, err))
		}
	}
	return errors.Join(errs...)
}
