package glance

import "github.com/flatcar-capo/flatcar-capo/pkg/disk"

// ErrNotDiskImage is disk's, which upload's refusals wrap: a compressed file refused by
// disk.Open and by upload is the same error.
var ErrNotDiskImage = disk.ErrNotDiskImage

// SelfOwner is this process's upload owner mark, for tests that fake another run's upload.
var SelfOwner = selfOwner
