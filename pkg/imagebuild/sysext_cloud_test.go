package imagebuild_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// TestBuildSysextCloud: `build --method sysext --cloud local` uploads the baked image to the
// real Keystone + Glance on 127.0.0.1 (scripts/openstack.sh, as the upload tests start it): the
// image is active under the -sysext name, Glance's sha512 of the data is the record's, and the
// record names the Glance ID.
func TestBuildSysextCloud(t *testing.T) {
	testutil.RequireTools(t, "uwsgi", "keystone-manage", "glance-manage", "glance-api", "mkfs.ext4", "mkfs.btrfs")
	dir := t.TempDir()
	clouds := sharedOpenStack(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	out := filepath.Join(dir, "out")
	args := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--cloud", "local"}
	args = append(args, mirror.Args()...)
	testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--property", "team=capi", "--tag", "team-a", "--visibility", "shared"),
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}}).MustSucceed(t)

	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	rec, err := record.Read(filepath.Join(out, name+".qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Glance) != 1 || rec.Glance[0].Cloud != "local" || rec.Glance[0].ID == "" {
		t.Fatalf("record glance: %+v", rec.Glance)
	}
	ctx := context.Background()
	c, err := glance.Connect(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.Get(ctx, c.Image, rec.Glance[0].ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != name || img.Status != images.ImageStatusActive || img.DiskFormat != "qcow2" {
		t.Errorf("Glance image %s: name %q status %q format %q", img.ID, img.Name, img.Status, img.DiskFormat)
	}
	var want string
	for _, a := range rec.Artifacts {
		if a.File == name+".qcow2" {
			want = a.SHA512
		}
	}
	if want == "" || fmt.Sprint(img.Properties["os_hash_value"]) != want {
		t.Errorf("Glance os_hash_value %v, record sha512 %q", img.Properties["os_hash_value"], want)
	}
	// Operators' metadata: min_disk from the 600 MiB virtual size, min_ram, os_distro, the flags.
	if img.MinDiskGigabytes != 1 || img.MinRAMMegabytes != glance.DefaultMinRAMMiB || img.Properties["os_distro"] != "flatcar" ||
		img.Properties["team"] != "capi" || !slices.Contains(img.Tags, "team-a") || img.Visibility != images.ImageVisibilityShared {
		t.Errorf("Glance metadata: min_disk %d min_ram %d properties %v tags %v visibility %s",
			img.MinDiskGigabytes, img.MinRAMMegabytes, img.Properties, img.Tags, img.Visibility)
	}
	if _, ok := img.Properties["hw_firmware_type"]; ok {
		t.Errorf("an amd64 BIOS-capable image got hw_firmware_type %v", img.Properties["hw_firmware_type"])
	}

	// manifests --from-record of this real record gives what the flags give, and it lints clean.
	recFile := filepath.Join(out, name+".qcow2.build.json")
	for _, ref := range []string{"orc", "id"} {
		fromRec := testutil.Run(t, "manifests", "--from-record", recFile, "--image-ref", ref).MustSucceed(t)
		byFlags := testutil.Run(t, "manifests", "--image-ref", ref, "--image-name", name, "--image-id", rec.Glance[0].ID,
			"--kubernetes-version", "v1.33.4", "--flavor", "sysext-baked").MustSucceed(t)
		if fromRec.Stdout != byFlags.Stdout || !strings.Contains(fromRec.Stdout, rec.Glance[0].ID) {
			t.Errorf("--image-ref %s: --from-record differs from the flags:\n%s\n----\n%s", ref, fromRec.Stdout, byFlags.Stdout)
		}
		m := filepath.Join(dir, ref+".yaml")
		os.WriteFile(m, []byte(fromRec.Stdout), 0o600)
		testutil.Run(t, "lint", m, "--from-record", recFile).MustSucceed(t)
	}
	src := testutil.Run(t, "manifests", "--from-record", recFile, "--image-source", "http://10.0.0.5/"+name+".qcow2").MustSucceed(t)
	if !strings.Contains(src.Stdout, "value: "+want) || !strings.Contains(src.Stdout, "minDiskGB: 1") || !strings.Contains(src.Stdout, "onDelete: detach") {
		t.Errorf("--image-source from the record lacks the sha512, min_disk or onDelete:\n%s", src.Stdout)
	}

	// --disk-format raw (Ceph-backed Glance): the artifact is reused, its disk streamed as raw.
	testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--disk-format", "raw", "--on-exists", "replace"),
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}}).MustSucceed(t)
	rec, err = record.Read(filepath.Join(out, name+".qcow2"))
	if err != nil || !rec.Reused || len(rec.Glance) != 1 {
		t.Fatalf("raw re-run: reused %v glance %+v %v", rec != nil && rec.Reused, rec, err)
	}
	raw, err := images.Get(ctx, c.Image, rec.Glance[0].ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	ra, closer, err := glance.Qcow2AsRaw(filepath.Join(out, name+".qcow2"))()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	h := sha512.New()
	io.Copy(h, io.NewSectionReader(ra, 0, 600<<20))
	if raw.DiskFormat != "raw" || raw.SizeBytes != 600<<20 || fmt.Sprint(raw.Properties["os_hash_value"]) != hex.EncodeToString(h.Sum(nil)) || raw.MinDiskGigabytes != 1 {
		t.Errorf("raw upload: format %s size %d min_disk %d os_hash_value %v", raw.DiskFormat, raw.SizeBytes, raw.MinDiskGigabytes, raw.Properties["os_hash_value"])
	}

	// The same Keystone + Glance (starting one takes minutes under load) for issue 19's runners.
	t.Run("ReproducibleNoSecrets", func(t *testing.T) { reproducibleNoSecrets(t, clouds) })
}
