package btrfs

const (
	fsTreeObjectID   = 5
	firstFreeObjID   = 256
	lastFreeObjID    = maxU64 - 256 // BTRFS_LAST_FREE_OBJECTID (-256)
	rootItemMinSize  = 239
	rootItemBytenr   = 176
	rootItemRootDir  = 168
	rootItemLevelOff = 238
)

// loadChunkTree adds every CHUNK_ITEM of the chunk tree to the bootstrap map.
func (fs *FS) loadChunkTree() error {
	var found []chunk
	lo, hi := key{firstChunkTree, typeChunkItem, 0}, key{firstChunkTree, typeChunkItem, maxU64}
	err := fs.walk(treeRoot{fs.sb.chunkRoot, fs.sb.chunkLevel}, lo, hi, func(b *block, slot int) (bool, error) {
		c, _, err := parseChunk(b.keys[slot].offset, b.data(slot))
		found = append(found, c)
		return true, err
	})
	if err != nil {
		return wrapf(err, "reading the chunk tree")
	}
	for _, c := range found {
		if err := fs.chunks.add(c); err != nil {
			return wrapf(err, "reading the chunk tree")
		}
	}
	return nil
}

// loadRootTree finds the FS tree (the top-level subvolume) and notes whether other
// subvolumes or snapshots exist.
func (fs *FS) loadRootTree() error {
	rootTree := treeRoot{fs.sb.root, fs.sb.rootLevel}
	b, slot, err := fs.last(rootTree, key{fsTreeObjectID, typeRootItem, maxU64})
	if err != nil {
		return wrapf(err, "reading the root tree")
	}
	if b == nil || b.keys[slot].objectID != fsTreeObjectID || b.keys[slot].typ != typeRootItem {
		return corruptf("root tree has no ROOT_ITEM for the FS tree")
	}
	ri := b.data(slot)
	if len(ri) < rootItemMinSize {
		return corruptf("FS tree ROOT_ITEM is %d bytes", len(ri))
	}
	fs.fsTree = treeRoot{le.Uint64(ri[rootItemBytenr:]), ri[rootItemLevelOff]}
	fs.rootDir = le.Uint64(ri[rootItemRootDir:])
	if fs.fsTree.level > maxTreeLevel {
		return corruptf("FS tree level %d", fs.fsTree.level)
	}
	if _, err := fs.readBlock(fs.fsTree.logical, fs.fsTree.level); err != nil {
		return wrapf(err, "reading the FS tree root")
	}
	err = fs.walk(rootTree, key{firstFreeObjID, 0, 0}, key{lastFreeObjID, 0xff, maxU64}, func(b *block, slot int) (bool, error) {
		fs.subvolumes = b.keys[slot].typ == typeRootItem
		return !fs.subvolumes, nil
	})
	return wrapf(err, "reading the root tree")
}
