package packer

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// killQEMUUsing kills every QEMU process whose command line names a path under dir: a QEMU that
// escaped packer's process group must not keep running, or writing, after a failed build.
func killQEMUUsing(dir string) {
	if dir == "" || dir == "/" {
		return
	}
	needle := []byte(filepath.Clean(dir) + "/")
	self := os.Getpid()
	for attempt := 0; attempt < 10; attempt++ {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.Contains(cmdline, needle) || !isQEMU(cmdline) {
				continue
			}
			found = true
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isQEMU: the program (argv[0]) is a qemu-system-* or qemu-kvm.
func isQEMU(cmdline []byte) bool {
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return bytes.HasPrefix([]byte(filepath.Base(string(argv0))), []byte("qemu"))
}
