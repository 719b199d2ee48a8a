package oem_test

import (
	"syscall"
	"testing"
)

// du is the number of bytes allocated to a file (sparse files allocate less than their size).
func du(t *testing.T, path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
