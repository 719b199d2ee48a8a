// Package sysext makes, reads and checks systemd system extensions (sysexts): squashfs images
// carrying /usr files and usr/lib/extension-release.d/extension-release.<NAME>, which
// systemd-sysext overlays onto the host's /usr at boot.
//
// Images are written in pure Go with go-diskfs' squashfs writer from a staging directory this
// package fills itself (go-diskfs copies ownership and xattrs from its source files; staging
// under our control keeps every file root-owned and xattr-free). Compression is gzip (default)
// or zstd, both of which Flatcar's kernel reads; go-diskfs' xz and lz4 output is rejected by the
// kernel.
//
// What go-diskfs v1.9.4 gets wrong, and what this package does about it:
//   - no padding to 4 KiB: a loop device drops the partial last sector and the kernel refuses
//     the image. Create pads; Problems flags an unpadded image.
//   - the superblock's creation time is time.Now(): Create rewrites it (SOURCE_DATE_EPOCH).
//   - directory inodes get nlink 0 and parent inode 0 (it looks for a stat type it never gets).
//     The kernel mounts and overlays such an image fine (kernel_test.go); the inode table is
//     compressed in place, so it cannot be corrected without rewriting the image
//     (FinalizeOptions.NoCompressInodes only sets the superblock flag).
//   - a new zstd encoder per 128 KiB block makes zstd slow: hence gzip level 1 by default.
//   - its workspace is forgotten after Finalize: Create removes it.
//
// Reading goes through go-diskfs too, after a superblock check of our own so that a truncated
// or foreign file is refused with a message instead of a panic deep in the reader.
package sysext
