//go:build image

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// TestContainerImage (make test-image): Debian's podman loads bin/image.tar and runs
// `build --method sysext` in it as the image's non-root user, with a read-only root filesystem,
// an empty /work volume and clouds.yaml mounted read-only, against the stand-in Kubernetes mirror
// and the real Keystone + Glance on the host's loopback (no other network).
func TestContainerImage(t *testing.T) {
	testutil.RequireTools(t, "podman", "uwsgi", "keystone-manage", "glance-api", "mkfs.ext4", "mkfs.btrfs")
	testutil.RequireRoot(t, "rootful podman")
	archive := filepath.Join(testutil.RepoRoot(), "bin", "image.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("%v: run make image first (make test-image does)", err)
	}
	out, err := exec.Command("podman", "load", "-i", archive).CombinedOutput()
	if err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "flatcar-capo:latest") {
		t.Fatalf("podman load did not name the image flatcar-capo:latest:\n%s", out)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the container's user reads clouds.yaml below it
	stack := testutil.StartOpenStack(t, filepath.Join(dir, "openstack"))
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	clouds := stack().CloudsYAML
	os.Chmod(filepath.Dir(clouds), 0o755)
	os.Chmod(clouds, 0o644)
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	os.Chown(work, User, User)
	os.Chmod(base, 0o644)

	args := []string{"run", "--rm", "--network", "host", "--read-only", "--user", fmt.Sprintf("%d:%d", User, User),
		"-v", work + ":/work", "-v", filepath.Dir(clouds) + ":/etc/openstack:ro", "-v", base + ":/in/base.img:ro",
		"-e", "OS_CLIENT_CONFIG_FILE=/etc/openstack/clouds.yaml",
		"localhost/flatcar-capo:latest", "build", "--method", "sysext", "--base-image", "/in/base.img", "--version", "4459.2.0",
		"--output-dir", "/work/out", "--cloud", "local", "--no-preload-images"}
	args = append(args, mirror.Args()...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := exec.CommandContext(ctx, "podman", podmanRun(args)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman run ... build: %v\n%s", err, run)
	}
	name := "flatcar-stable-4459.2.0-kube-" + kubetest.Version + "-sysext"
	if _, err := os.Stat(filepath.Join(work, "out", name+".qcow2")); err != nil {
		t.Errorf("the artifact is not in the /work volume: %v\n%s", err, run)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	c, err := glance.Connect(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := images.List(c.Image, images.ListOpts{Name: name}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	imgs, _ := images.ExtractImages(pages)
	if len(imgs) != 1 || imgs[0].Status != images.ImageStatusActive {
		t.Errorf("Glance has %d images named %s: %+v\n%s", len(imgs), name, imgs, run)
	}
	user, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}}", "localhost/flatcar-capo:latest").CombinedOutput()
	if err != nil || strings.TrimSpace(string(user)) != fmt.Sprintf("%d:%d", User, User) {
		t.Errorf("the image's user is %q (%v), want the non-root %d", user, err, User)
	}
}

// TestContainerImagePacker: make image-packer's image runs packer (with its QEMU plugin found)
// and Debian's QEMU from inside, as the non-root user with a read-only root filesystem.
func TestContainerImagePacker(t *testing.T) {
	testutil.RequireTools(t, "podman")
	testutil.RequireRoot(t, "rootful podman")
	archive := filepath.Join(testutil.RepoRoot(), "bin", "image-packer.tar")
	if out, err := exec.Command("podman", "load", "-i", archive).CombinedOutput(); err != nil || !strings.Contains(string(out), "flatcar-capo:packer") {
		t.Fatalf("podman load %s: %v\n%s", archive, err, out)
	}
	work := t.TempDir() // packer writes its log file into TMPDIR (/work)
	os.Chmod(work, 0o755)
	os.Chown(work, User, User)
	for _, c := range [][]string{
		{"/usr/local/bin/packer", "plugins", "installed"},
		{"/usr/bin/qemu-system-x86_64", "--version"},
		{"/usr/bin/qemu-img", "--version"},
	} {
		args := append([]string{"run", "--rm", "--read-only", "-v", work + ":/work", "--network", "none", "--entrypoint", c[0], "localhost/flatcar-capo:packer"}, c[1:]...)
		out, err := exec.Command("podman", podmanRun(args)...).CombinedOutput()
		if err != nil {
			t.Errorf("%v in the image: %v\n%s", c, err, out)
			continue
		}
		if c[1] == "plugins" && !strings.Contains(string(out), "qemu") {
			t.Errorf("packer in the image does not find its QEMU plugin:\n%s", out)
		}
	}
}

// podmanRun adds what podman needs in a sandbox like CI's: no CAP_SYS_RESOURCE (so no rlimit may
// be raised: keep nofile and nproc low) and hybrid cgroups, which crun refuses (runc with the
// cgroupfs manager copes). args starts with "run".
func podmanRun(args []string) []string {
	return append([]string{"--cgroup-manager=cgroupfs", "run", "--runtime", "runc",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}, args[1:]...)
}
