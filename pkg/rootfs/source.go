package rootfs

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/diskfs/go-diskfs/filesystem/ext4"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// uncarriableError names every entry of the original ROOT that a fresh filesystem cannot
// reproduce (hard links, device nodes, fifos, sockets, extended attributes, ...).
type uncarriableError struct {
	Problems []string // "/path: reason"
}

func (e *uncarriableError) Error() string {
	const show = 20
	list := e.Problems
	more := ""
	if len(list) > show {
		more = fmt.Sprintf("\n  ... and %d more", len(list)-show)
		list = list[:show]
	}
	entries := "entries"
	if len(e.Problems) == 1 {
		entries = "entry"
	}
	return fmt.Sprintf("the image's ROOT filesystem holds %d %s that cannot be carried into a new ROOT:\n  %s%s\n"+
		"remove them from the image (or start from a release image, whose ROOT has none), then run again",
		len(e.Problems), entries, strings.Join(list, "\n  "), more)
}

// readTree lists the original ROOT (everything but the root directory itself, whose metadata is
// returned separately), parents before children. Regular files are opened lazily from old.
func readTree(old *disk.FS) (root Entry, entries []Entry, err error) {
	root, problems, err := statEntry(old, ".")
	if err != nil {
		return Entry{}, nil, err
	}
	err = fs.WalkDir(old, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the directory %s in the original ROOT: %w", p, err)
		}
		if p == "." {
			return nil
		}
		e, probs, err := statEntry(old, p)
		if err != nil {
			return err
		}
		if len(probs) > 0 {
			problems = append(problems, probs...)
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return Entry{}, nil, err
	}
	if len(problems) > 0 {
		return Entry{}, nil, &uncarriableError{Problems: problems}
	}
	return root, entries, nil
}

// statEntry reads one entry's metadata and says why it cannot be carried, if it cannot.
func statEntry(old *disk.FS, p string) (Entry, []string, error) {
	if p == "" { // the root Entry's Path
		p = "."
	}
	shown := "/" + p
	if p == "." {
		shown = "/"
	}
	fi, err := old.Lstat(p) // the entry itself, a symlink too
	if err != nil {
		return Entry{}, nil, fmt.Errorf("reading %s in the original ROOT: %w", shown, err)
	}
	st, ok := fi.Sys().(*ext4.StatT)
	if !ok {
		return Entry{}, nil, fmt.Errorf("reading %s in the original ROOT: no ext4 metadata", shown)
	}
	e := Entry{Path: p, Mode: fi.Mode(), UID: st.UID, GID: st.GID, ModTime: fi.ModTime(), Size: fi.Size()}
	var problems []string
	bad := func(why string) { problems = append(problems, shown+": "+why) }
	mode := fi.Mode()
	switch {
	case mode.IsDir():
	case mode&fs.ModeSymlink != 0:
		e.Target = st.LinkTarget
		if e.Target == "" {
			bad("symlink with an empty or unreadable target")
		}
	case mode.IsRegular():
		if st.Nlink > 1 {
			bad(fmt.Sprintf("hard link (%d names for inode %d); a new filesystem would split it into copies", st.Nlink, st.Ino))
		}
		allHole := st.Blocks == 0 && fi.Size() > 0
		if st.Flags.InlineData {
			bad("inline-data file (the ext4 reader cannot read it)")
		} else if blocks := (fi.Size() + 4095) / 4096; !allHole && int64(st.Blocks)*512 < blocks*4096 {
			// go-diskfs reads extents back to back: a file with data after a hole would be misread.
			bad("sparse file with both data and holes (the ext4 reader cannot read it)")
		}
		size := fi.Size()
		e.Open = func() (io.ReadCloser, error) {
			if allHole { // mkfs -d stores all-zero files as one hole: nothing to read
				return io.NopCloser(io.LimitReader(vdisk.Zeros{}, size)), nil
			}
			f, err := old.OpenFile(p, 0)
			if err != nil {
				return nil, fmt.Errorf("opening %s in the original ROOT: %w", shown, err)
			}
			return f, nil
		}
	case mode&fs.ModeDevice != 0:
		bad(fmt.Sprintf("device node (%d:%d)", st.Major, st.Minor))
	case mode&fs.ModeNamedPipe != 0:
		bad("named pipe (fifo)")
	case mode&fs.ModeSocket != 0:
		bad("socket")
	default:
		bad(fmt.Sprintf("unsupported file type (mode %v)", mode))
	}
	if st.Flags.Immutable || st.Flags.AppendOnly {
		bad("immutable or append-only flag")
	}
	if st.Flags.Encrypted {
		bad("encrypted inode")
	}
	if x, err := old.GetXattr(p); err != nil {
		return Entry{}, nil, fmt.Errorf("reading the extended attributes of %s in the original ROOT: %w", shown, err)
	} else if len(x) > 0 {
		bad("extended attributes (" + strings.Join(slices.Sorted(maps.Keys(x)), ", ") + ")")
	}
	if p == "." {
		e.Path = ""
	} else {
		e.Path = path.Clean(p)
	}
	return e, problems, nil
}
