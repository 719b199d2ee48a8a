package glance_test

import (
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// rawImage writes a raw image of size bytes whose first MiB is random (seeded), so that two
// images with different seeds differ.
func rawImage(t *testing.T, dir string, seed int64, size int64) string {
	t.Helper()
	path := filepath.Join(dir, "disk.raw")
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(seed)).Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	return path
}

func qcow2Image(t *testing.T, dir string, seed int64) string {
	t.Helper()
	testutil.RequireTools(t, "qemu-img")
	raw := rawImage(t, t.TempDir(), seed, 8<<20)
	path := filepath.Join(dir, "disk.img") // the extension says nothing: the header decides
	testutil.QemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, path)
	return path
}

func decodeResults(t *testing.T, r testutil.Result) []glance.Result {
	t.Helper()
	var res []glance.Result
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("upload -o json is not a JSON list: %v\n%s", err, r.Stdout)
	}
	return res
}

type imageShow struct {
	Status          string         `json:"status"`
	DiskFormat      string         `json:"disk_format"`
	ContainerFormat string         `json:"container_format"`
	Tags            []string       `json:"tags"`
	Properties      map[string]any `json:"properties"`
	MinDisk         int            `json:"min_disk"`
	MinRAM          int            `json:"min_ram"`
	Size            int64          `json:"size"`
	Visibility      string         `json:"visibility"`
}

// openstackShow asks the real openstack CLI, as a user would check the result.
func openstackShow(t *testing.T, cloud, id string) imageShow {
	t.Helper()
	testutil.RequireTools(t, "openstack")
	cmd := exec.Command("openstack", "--os-cloud", cloud, "image", "show", "-f", "json", id)
	cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+stack.env["OS_CLIENT_CONFIG_FILE"])
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openstack image show %s: %v", id, err)
	}
	var s imageShow
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("openstack image show: %v\n%s", err, out)
	}
	return s
}

func TestUploadQcow2AndRaw(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	qcow := qcow2Image(t, t.TempDir(), 1)
	raw := rawImage(t, dir, 2, 16<<20)
	// The raw image carries a build record, as the build command writes it.
	// and names its SBOM, whose sha256 Glance gets as flatcar_capo_sbom_sha256.
	sbomSum := strings.Repeat("5e", 32)
	os.WriteFile(raw+".build.json", []byte(`{"flatcarVersion":"4459.2.0","kubernetesVersion":"v1.33.1","arch":"arm64",
		"sbom":{"file":"x.cdx.json","sha256":"`+sbomSum+`"}}`), 0o644)
	x86 := rawImage(t, t.TempDir(), 4, 2<<20)
	cases := []struct {
		file, format    string
		args            []string
		props           map[string]string
		tags            []string
		minDisk, minRAM int
		uefi            bool
	}{
		{qcow, "qcow2", []string{"--flatcar-version", "4230.2.3", "--kubernetes-version", "1.32.4", "--property", "os_type=linux", "--property", "hw_disk_bus=scsi", "--tag", "team-a"},
			map[string]string{"os_distro": "flatcar", "os_type": "linux", "hw_qemu_guest_agent": "yes", "architecture": "x86_64",
				"os_version": "4230.2.3", "kubernetes_version": "v1.32.4", "hw_disk_bus": "scsi"},
			[]string{"flatcar-capo", "kube-v1.32.4", "team-a"}, 1, glance.DefaultMinRAMMiB, false},
		// arm64 Flatcar boots only with UEFI: hw_firmware_type=uefi from the record's arch.
		{raw, "raw", []string{"--property", "hw_qemu_guest_agent=no", "--min-ram", "4096"},
			map[string]string{"os_distro": "flatcar", "hw_qemu_guest_agent": "no", "architecture": "aarch64",
				"os_version": "4459.2.0", "kubernetes_version": "v1.33.1", "hw_firmware_type": "uefi", glance.PropertySBOMSHA256: sbomSum},
			[]string{"flatcar-capo", "kube-v1.33.1"}, 1, 4096, true},
		{x86, "raw", []string{"--firmware", "uefi", "--min-disk", "3"}, map[string]string{"hw_firmware_type": "uefi"}, []string{"flatcar-capo"}, 3, glance.DefaultMinRAMMiB, true},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			name := uniqueName(t)
			r := upload(t, nil, append([]string{c.file, "--name", name, "--cloud", "local", "-o", "json"}, c.args...)...).MustSucceed(t)
			res := decodeResults(t, r)
			if len(res) != 1 || res[0].Action != "uploaded" || res[0].Region != "RegionOne" {
				t.Fatalf("unexpected report %+v", res)
			}
			show := openstackShow(t, "local", res[0].ID)
			if show.Status != "active" || show.DiskFormat != c.format || show.ContainerFormat != "bare" {
				t.Fatalf("openstack image show: status %s, disk_format %s, container_format %s", show.Status, show.DiskFormat, show.ContainerFormat)
			}
			for k, v := range c.props {
				if show.Properties[k] != v {
					t.Errorf("property %s = %v, want %s", k, show.Properties[k], v)
				}
			}
			if _, set := show.Properties["hw_firmware_type"]; set != c.uefi {
				t.Errorf("hw_firmware_type %v, want it set: %v", show.Properties["hw_firmware_type"], c.uefi)
			}
			if show.MinDisk != c.minDisk || show.MinRAM != c.minRAM || res[0].MinDisk != c.minDisk {
				t.Errorf("min_disk %d (reported %d) min_ram %d, want %d and %d", show.MinDisk, res[0].MinDisk, show.MinRAM, c.minDisk, c.minRAM)
			}
			slices.Sort(show.Tags)
			if !slices.Equal(show.Tags, c.tags) {
				t.Errorf("tags %v, want %v", show.Tags, c.tags)
			}
			if got, want := show.Properties["os_hash_value"], testutil.SHA512File(t, c.file); got != want || res[0].Checksum != want {
				t.Errorf("Glance's sha512 %v (reported %s), the file's %s", got, res[0].Checksum, want)
			}
		})
	}
}

func TestReuseReplaceFail(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	img := rawImage(t, t.TempDir(), 3, 4<<20)
	first := decodeResults(t, upload(t, nil, img, "--name", name, "--cloud", "local", "-o", "json").MustSucceed(t))[0]

	r := upload(t, nil, img, "--name", name, "--cloud", "local", "-o", "json").MustSucceed(t)
	if again := decodeResults(t, r)[0]; again.Action != "reused" || again.ID != first.ID {
		t.Fatalf("re-run with reuse: %+v, want the same image %s reused", again, first.ID)
	}
	if strings.Contains(r.Stderr, "upload to ") {
		t.Fatalf("reuse uploaded data:\n%s", r.Stderr)
	}
	assertOnlyActive(t, "local", name, 1)

	changed := rawImage(t, t.TempDir(), 4, 4<<20)
	upload(t, nil, changed, "--name", name, "--cloud", "local").MustFail(t, 1, "different content", "--on-exists replace")
	upload(t, nil, changed, "--name", name, "--cloud", "local", "--on-exists", "fail").MustFail(t, 1, "already exists", first.ID)

	r = upload(t, nil, changed, "--name", name, "--cloud", "local", "--on-exists", "replace", "-o", "json").MustSucceed(t)
	repl := decodeResults(t, r)[0]
	if repl.Action != "replaced" || repl.ID == first.ID || !slices.Equal(repl.Replaced, []string{first.ID}) {
		t.Fatalf("replace: %+v", repl)
	}
	if left := assertOnlyActive(t, "local", name, 1); left[0].ID != repl.ID {
		t.Fatalf("after replace the image named %q is %s, want %s", name, left[0].ID, repl.ID)
	}
	// Plain text output: the ID alone on stdout, for scripts.
	r = upload(t, nil, changed, "--name", name, "--cloud", "local").MustSucceed(t)
	if strings.TrimSpace(r.Stdout) != repl.ID {
		t.Fatalf("text output %q, want the image ID %s", r.Stdout, repl.ID)
	}
}

func TestTwoRegionsAtOnce(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	img := qcow2Image(t, t.TempDir(), 5)
	r := upload(t, nil, img, "--name", name, "--cloud", "local", "--cloud", "local-two", "-o", "json").MustSucceed(t)
	res := decodeResults(t, r)
	if len(res) != 2 || res[0].Region != "RegionOne" || res[1].Region != "RegionTwo" || res[0].ID == res[1].ID {
		t.Fatalf("two regions: %+v", res)
	}
	for _, c := range []string{"upload to local/RegionOne", "upload to local-two/RegionTwo"} {
		if !strings.Contains(r.Stderr, c) {
			t.Errorf("no progress line %q in:\n%s", c, r.Stderr)
		}
	}
	if got := assertOnlyActive(t, "local", name, 1)[0].ID; got != res[0].ID {
		t.Errorf("RegionOne holds %s, want %s", got, res[0].ID)
	}
	if got := assertOnlyActive(t, "local-two", name, 1)[0].ID; got != res[1].ID {
		t.Errorf("RegionTwo holds %s, want %s", got, res[1].ID)
	}
}

// The credentials can come from OS_* variables (openrc, with user/project domain names), from
// OS_CLOUD, and from an application credential in clouds.yaml.
func TestAuthSources(t *testing.T) {
	needOpenStack(t)
	img := rawImage(t, t.TempDir(), 6, 1<<20)
	var openrc []string
	for k, v := range readOpenrc(filepath.Join(stack.dir, "openrc")) {
		openrc = append(openrc, k+"="+v)
	}
	cases := map[string][]string{
		"openrc":   append([]string{"OS_CLIENT_CONFIG_FILE=/nonexistent/clouds.yaml"}, openrc...),
		"OS_CLOUD": {"OS_CLOUD=local", "OS_CLIENT_CONFIG_FILE=" + stack.env["OS_CLIENT_CONFIG_FILE"]},
	}
	for label, env := range cases {
		t.Run(label, func(t *testing.T) {
			name := uniqueName(t)
			r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", img, "--name", name}, Env: env}).MustSucceed(t)
			assertNoSecrets(t, r)
			assertOnlyActive(t, "local", name, 1)
		})
	}
	t.Run("appcred", func(t *testing.T) {
		name := uniqueName(t)
		upload(t, nil, img, "--name", name, "--cloud", "local-appcred").MustSucceed(t)
		assertOnlyActive(t, "local", name, 1)
	})
}

// A raw image streamed as qcow2 on the fly: Glance holds a qcow2 whose content is the raw disk.
func TestRawStreamedAsQcow2(t *testing.T) {
	needOpenStack(t)
	testutil.RequireTools(t, "qemu-img", "openstack")
	dir := t.TempDir()
	raw := rawImage(t, dir, 12, 64<<20)
	name := uniqueName(t)
	res := decodeResults(t, upload(t, nil, raw, "--name", name, "--cloud", "local", "--disk-format", "qcow2", "-o", "json").MustSucceed(t))[0]
	show := openstackShow(t, "local", res.ID)
	if show.Status != "active" || show.DiskFormat != "qcow2" || show.Properties["os_hash_value"] != res.Checksum {
		t.Fatalf("openstack image show: %+v, report %+v", show, res)
	}
	if res.Size >= 64<<20 {
		t.Errorf("the qcow2 stream is %d bytes: the holes of the raw file were sent", res.Size)
	}
	saved := filepath.Join(dir, "saved.qcow2")
	cmd := exec.Command("openstack", "--os-cloud", "local", "image", "save", "--file", saved, res.ID)
	cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+stack.env["OS_CLIENT_CONFIG_FILE"])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openstack image save: %v\n%s", err, out)
	}
	if out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", raw, saved).CombinedOutput(); err != nil {
		t.Fatalf("the uploaded qcow2 differs from the raw image: %v\n%s", err, out)
	}
	// The same stream again is recognised as the same content.
	r := upload(t, nil, raw, "--name", name, "--cloud", "local", "--disk-format", "qcow2", "-o", "json").MustSucceed(t)
	if again := decodeResults(t, r)[0]; again.Action != "reused" || again.ID != res.ID {
		t.Fatalf("second run: %+v", again)
	}
	// --disk-format raw streams the qcow2's disk back as raw: Glance's sha512 is the raw file's.
	rawName := uniqueName(t) + "-raw"
	res = decodeResults(t, upload(t, nil, saved, "--name", rawName, "--cloud", "local", "--disk-format", "raw", "-o", "json").MustSucceed(t))[0]
	show = openstackShow(t, "local", res.ID)
	rawSize, _ := os.Stat(raw)
	if show.DiskFormat != "raw" || show.Size != rawSize.Size() || show.Properties["os_hash_value"] != testutil.SHA512File(t, raw) || show.MinDisk != 1 {
		t.Errorf("raw from qcow2: format %s size %d (raw file %d) min_disk %d sha512 %v, want the raw file's %s",
			show.DiskFormat, show.Size, rawSize.Size(), show.MinDisk, show.Properties["os_hash_value"], testutil.SHA512File(t, raw))
	}
	upload(t, nil, saved, "--name", rawName, "--cloud", "local", "--firmware", "efi").MustFail(t, 2, "--firmware")
}
