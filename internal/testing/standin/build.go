package standin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

// Sizes of the guest's disk (sparse; the data is ~300 MB).
const (
	usraSize = 1 << 30 // USR-A, as Flatcar's; holds the ext4 /usr
	diskSize = 3 << 30 // ROOT takes what the other partitions leave (~1.6 GiB)
)

// Tools are the host programs Build runs.
var Tools = []string{"mmdebstrap", "chroot", "mkfs.ext4", "debugfs", "e2fsck", "mkfs.btrfs", "mkfs.vfat", "mcopy", "grub-mkimage", "busybox"}

// errNeedsRoot: mmdebstrap --mode=root and the chroot steps need root (CI runs as root).
var errNeedsRoot = errors.New("building the stand-in guest needs root (mmdebstrap --mode=root; CI runs tests as root)")

// CacheDir is where built guests are kept: <user cache dir>/flatcar-capo/standin.
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "flatcar-capo", "standin"), nil
}

// build returns the path of the guest's raw disk for opts, building it on first use. The file
// is shared by every caller: never write to it (copy it, e.g. with disk.CopySparse). Concurrent
// callers, also in other processes, wait for one build.
func build(ctx context.Context, opts Options) (string, error) {
	if err := opts.validate(); err != nil {
		return "", err
	}
	k, err := hostKernel()
	if err != nil {
		return "", err
	}
	ign, err := ignitionBinary(ctx)
	if err != nil {
		return "", err
	}
	key, err := inputsHash(k)
	if err != nil {
		return "", err
	}
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	usr, err := opts.usrName()
	if err != nil {
		return "", err
	}
	diskOpts := opts.diskOptions(dir, usr, k)
	// The initramfs (/init, Ignition) is made with the disk: a new Ignition needs no new /usr.
	initrdKey, err := initramfsHash(ign)
	if err != nil {
		return "", err
	}
	image := filepath.Join(dir, "disk-"+opts.oem()+"-"+diskHash(diskOpts)+"-"+initrdKey+".img")
	if _, err := os.Stat(image); err == nil {
		return image, nil
	}
	if os.Geteuid() != 0 {
		return "", errNeedsRoot
	}
	for _, t := range Tools {
		if _, err := exec.LookPath(t); err != nil {
			return "", fmt.Errorf("building the stand-in guest needs %s (scripts/install-deps.sh installs it): %w", t, err)
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(ctx, filepath.Join(root, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(image); err == nil { // built by another process while we waited
		return image, nil
	}
	if err := buildSystem(ctx, root, dir, k, opts); err != nil {
		return "", err
	}
	if err := addSysexts(ctx, filepath.Join(dir, "usr.ext4"), diskOpts.USRAImage, opts); err != nil {
		return "", err
	}
	start := time.Now()
	tmp := image + ".tmp"
	initrd, err := makeInitramfs(k, ign)
	if err != nil {
		return "", err
	}
	diskOpts.Initramfs = initrd
	err = flatcardisk.BuildTo(tmp, diskOpts)
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("standin: making the disk: %w", err)
	}
	if err := os.Chmod(tmp, 0o444); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, image); err != nil {
		return "", err
	}
	opts.logf("standin: disk %s made in %s", image, time.Since(start).Round(time.Millisecond))
	return image, nil
}

// diskOptions describe the disk around the built /usr (dir/usr; the initramfs is read from dir later).
func (o Options) diskOptions(dir, usr string, k kernelInfo) flatcardisk.Options {
	return flatcardisk.Options{
		OEM:       flatcardisk.OEMBtrfs,
		OEMID:     o.oem(),
		GrubCfg:   o.grubCfg(),
		FirstBoot: true,
		Bootable:  true,
		DiskSize:  diskSize,
		USRASize:  usraSize,
		USRAImage: filepath.Join(dir, usr),
		Kernel:    k.path,
	}
}

// diskHash names the disk by what flatcardisk puts on it besides /usr, so a change there (GRUB
// config, OEM files) makes a new disk without rebuilding the Debian root.
func diskHash(o flatcardisk.Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "%#v\n%s\n", o, flatcardisk.MainGrubCfg())
	files := flatcardisk.OEMFiles(o)
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		fmt.Fprintf(h, "%s %x\n", name, sha256.Sum256(files[name]))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// buildSystem makes dir/usr.ext4 (USR-A's filesystem) unless it exists; the Debian root is
// built in a temporary directory next to dir and removed afterwards.
func buildSystem(ctx context.Context, root, dir string, k kernelInfo, opts Options) error {
	if _, err := os.Stat(filepath.Join(dir, "usr.ext4")); err == nil {
		return nil
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "root")
	if err := debootstrap(ctx, tree); err != nil {
		return err
	}
	opts.logf("standin: mmdebstrap made the Debian root in %s", time.Since(start).Round(time.Millisecond))
	if err := customize(ctx, tree, k); err != nil {
		return fmt.Errorf("standin: customizing the Debian root: %w", err)
	}
	usr := filepath.Join(tmp, "usr.ext4")
	if err := makeUSR(ctx, usr, filepath.Join(tree, "usr")); err != nil {
		return err
	}
	if err := os.Chmod(usr, 0o444); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// usr.ext4's presence says the directory is complete.
	if err := os.Rename(usr, filepath.Join(dir, "usr.ext4")); err != nil {
		return err
	}
	opts.logf("standin: /usr filesystem made in %s", time.Since(start).Round(time.Millisecond))
	prune(root, filepath.Base(dir))
	return nil
}

// makeUSR makes USR-A's ext4 from the /usr tree (as root, so owners are kept), with a fixed
// UUID, hash seed and time so identical trees give identical filesystems.
func makeUSR(ctx context.Context, file, tree string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := f.Truncate(usraSize); err != nil {
		f.Close()
		return err
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "USR-A", "-b", "4096", "-m", "0",
		"-U", "7130c94a-213a-4e5a-8e26-6cce9662f132", "-E", "hash_seed=7130c94a-213a-4e5a-8e26-6cce9662f132",
		"-d", tree, file)
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME="+sourceDateEpoch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 for USR-A: %w\n%s", err, out)
	}
	return nil
}

// inputsHash names a /usr build by everything that goes into it.
func inputsHash(k kernelInfo) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%d %d\n", builderVersion, strings.Join(packages, ","),
		strings.Join(wantModules, ","), osRelease(), usraSize, diskSize)
	fmt.Fprintf(h, "%q %q %q\n", enabled, masked, sourceDateEpoch)
	fmt.Fprintf(h, "kernel %s\n", k.version)
	if err := hashFile(h, k.path); err != nil {
		return "", err
	}
	err := fs.WalkDir(guestFiles, "guest", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := guestFiles.ReadFile(path)
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
		return err
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// initramfsHash names the initramfs by its /init, udhcpc script and Ignition binary (its
// modules come from the kernel, which is in inputsHash).
func initramfsHash(ignition string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", initScript, udhcpcScript)
	if err := hashFile(h, ignition); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}
