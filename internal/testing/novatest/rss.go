package novatest

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// RSS sums the resident memory of the cloud's processes (those in its namespace and those whose
// command line names Dir: QEMU, the helpers of the agents), in bytes, by command name.
func (c *Cloud) RSS() (total int64, byName map[string]int64) {
	byName = map[string]int64{}
	nsIno := inode("/run/netns/" + c.Netns)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		ours := strings.Contains(string(cmdline), c.Dir)
		if !ours && nsIno != 0 && inode(filepath.Join(dir, "ns/net")) == nsIno {
			ours = true
		}
		if !ours {
			continue
		}
		rss := statusKB(filepath.Join(dir, "status"), "VmRSS:") * 1024
		name := processName(cmdline)
		byName[name] += rss
		total += rss
	}
	return total, byName
}

func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func statusKB(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// processName is a daemon's name: the script python runs, else the program's base name.
func processName(cmdline []byte) string {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 || args[0] == "" {
		return "?"
	}
	name := filepath.Base(args[0])
	if strings.HasPrefix(name, "python") && len(args) > 1 {
		name = filepath.Base(args[1])
	}
	return name
}
