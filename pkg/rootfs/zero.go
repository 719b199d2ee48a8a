package rootfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// zeroRange makes [off, off+n) of f read as zeros: a punched hole where the filesystem can (the
// copy stays sparse and old ROOT data does not linger under the new filesystem), else zeros.
func zeroRange(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	zero := make([]byte, 1<<20)
	for n > 0 {
		c := min(n, int64(len(zero)))
		if _, err := f.WriteAt(zero[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}
