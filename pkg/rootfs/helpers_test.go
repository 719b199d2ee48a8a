package rootfs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

var e2tools = []string{"mkfs.ext4", "e2fsck", "debugfs", "dumpe2fs", "resize2fs"}

var (
	run         = testutil.MustRun
	rootRange   = rootfstest.RootRange
	extractRoot = rootfstest.ExtractRoot
	fsck        = rootfstest.Fsck
	stat        = rootfstest.Stat
	dumpSum     = rootfstest.DumpSum
	fileSum     = testutil.SHA256File
)

// image returns a Flatcar-layout disk (t.TempDir) of diskSize bytes whose ROOT is made by
// `mkfs.ext4 -d staging` with Flatcar's options, then edited with debugfs commands (owners,
// times, device nodes, xattrs: no root needed). staging "" keeps the fixture's empty ROOT.
func image(t testing.TB, diskSize int64, staging string, debugfsCmds ...string) string {
	t.Helper()
	testutil.RequireTools(t, e2tools...)
	img := flatcardisk.Build(t, flatcardisk.Options{DiskSize: diskSize}) // 0: the 600 MiB default
	if staging == "" && len(debugfsCmds) == 0 {
		return img
	}
	start, size := rootRange(t, img)
	fsFile := filepath.Join(t.TempDir(), "root.ext4")
	f, err := os.Create(fsFile)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	args := []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-i", "4096", "-I", "256", "-L", "ROOT"}
	if staging != "" {
		args = append(args, "-d", staging)
	}
	run(t, "mkfs.ext4", append(args, fsFile)...)
	if len(debugfsCmds) > 0 {
		cmds := filepath.Join(t.TempDir(), "debugfs.cmds")
		os.WriteFile(cmds, []byte(strings.Join(debugfsCmds, "\n")+"\n"), 0o644)
		out := run(t, "debugfs", "-w", "-f", cmds, fsFile)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, ": ") && !strings.HasPrefix(l, "debugfs ") && !strings.HasPrefix(l, "debugfs:") && !strings.HasPrefix(l, "Allocated inode") {
				t.Fatalf("debugfs: %s\n%s", l, out)
			}
		}
	}
	in, err := os.Open(fsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// The fixture's ROOT range holds the fixture's own mkfs: clear it, then copy only the new
	// filesystem's data (the image stays sparse, a few MiB written instead of the whole ROOT).
	if err := vdisk.ZeroRange(out, start, size); err != nil {
		t.Fatal(err)
	}
	buf, zero := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, err := in.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := out.WriteAt(buf[:n], start+off); err != nil {
				t.Fatal(err)
			}
		}
	}
	return img
}

// randomFile writes n pseudo-random (incompressible, deterministic) bytes.
func randomFile(t testing.TB, n int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sysext.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, r, n); err != nil {
		t.Fatal(err)
	}
	return p
}

// dirListing lists a directory of the temp dir, to show nothing was left behind.
func dirListing(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

// kubernetesExtension is the Kubernetes sysext entry with the conventional names.
func kubernetesExtension(source, version, arch string) (Extension, error) {
	name, err := sysext.KubernetesFileName(version, arch)
	if err != nil {
		return Extension{}, err
	}
	return Extension{Name: sysext.KubernetesName, FileName: name, Source: source}, nil
}
