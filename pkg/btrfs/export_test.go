package btrfs

// generation is the inode's creation transaction, which only the tests read.
func (i inodeItem) generation() uint64 { return le.Uint64(i[0:]) }

// Label is the filesystem label (mkfs.btrfs -L).
func (fs *FS) Label() string { return fs.sb.label }

// Stat describes the file or directory at path; directories report size 0.
func (fs *FS) Stat(p string) (DirEntry, error) {
	in, err := fs.resolve("stat", p)
	if err != nil {
		return DirEntry{}, err
	}
	names := splitPath(p)
	e := DirEntry{Name: "/", IsDir: in.item.isDir()}
	if len(names) > 0 {
		e.Name = names[len(names)-1]
	}
	if !e.IsDir {
		e.Size = int64(min(in.item.size(), 1<<62))
	}
	return e, nil
}
