package glance

import (
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// ErrNotDiskImage is disk's, which upload's refusals wrap: a compressed file refused by
// disk.Open and by upload is the same error.
var ErrNotDiskImage = disk.ErrNotDiskImage

// SelfOwner is this process's upload owner mark, held (alive) until the test ends, for tests
// that fake another run's upload.
func SelfOwner(t testing.TB) string {
	holdOwner()
	t.Cleanup(func() { releaseOwner(false) })
	return selfOwner
}
