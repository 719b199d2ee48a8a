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
// Reading goes through go-diskfs too, after a superblock check of our own so that a truncated
// or foreign file is refused with a message instead of a panic deep in the reader.
package sysext
