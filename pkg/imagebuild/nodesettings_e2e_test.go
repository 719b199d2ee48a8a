package imagebuild_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// A base with a hybrid MBR (Flatcar LTS 4081, releases before 4459.2.0) built with the node
// settings: convert of the base says how to fix its MBR; build writes a protective MBR (the real
// sgdisk and fdisk read it so), records it, turns USB storage off with a modprobe.d file the real
// modprobe obeys, writes enabled-sysext.conf and puts flatcar.release_file_server_url in the
// OEM grub.cfg; inspect shows all of it. --keep-usb-storage (here from its environment variable)
// leaves the file out, and bad values are refused before anything is downloaded.
func TestBuildNodeSettingsAndProtectiveMBR(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs", "sgdisk", "fdisk", "modprobe")
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, HybridMBR: true})
	dir := t.TempDir()
	args := func(out string, extra ...string) []string {
		a := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4081.3.10",
			"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out}
		return append(append(a, mirror.Args()...), extra...)
	}

	// convert of the hybrid base: the output converts, with what Glance and Nova will say and the fix.
	res := testutil.Run(t, "convert", base, filepath.Join(dir, "base.qcow2")).MustSucceed(t)
	for _, want := range []string{"warning: " + filepath.Join(dir, "base.qcow2") + " has a hybrid MBR", "Glance 2026.2", "--protective-mbr"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("convert of a hybrid-MBR image does not say %q:\n%s", want, res.Stderr)
		}
	}

	// upload says it too before it sends anything (here to a cloud that answers nothing).
	clouds := filepath.Join(dir, "clouds.yaml")
	os.WriteFile(clouds, []byte("clouds:\n  dead:\n    auth: {auth_url: http://127.0.0.1:1/v3, username: u, password: p, project_name: p}\n"), 0o600)
	res = testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", base, "--name", "lts", "--cloud", "dead"},
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}}).MustFail(t, 1)
	if !strings.Contains(res.Stderr, "warning: "+base+" has a hybrid MBR") || !strings.Contains(res.Stderr, "oem set "+base+" --id openstack --protective-mbr") {
		t.Errorf("upload of a hybrid-MBR image does not say how to fix it:\n%s", res.Stderr)
	}

	out := filepath.Join(dir, "out")
	server := "http://10.0.0.5:8080/flatcar-mirror"
	res = testutil.Run(t, args(out, "--enable-sysext", "zfs", "--enable-sysext", "podman", "--release-file-server", server)...).MustSucceed(t)
	if !strings.Contains(res.Stdout, "hybrid MBR replaced with a protective MBR") {
		t.Errorf("build does not say it replaced the hybrid MBR:\n%s", res.Stdout)
	}
	qcow2 := filepath.Join(out, "flatcar-stable-4081.3.10-kube-"+kubetest.Version+"-sysext.qcow2")
	rec, err := record.Read(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Base.MBR != "hybrid" || !rec.Base.MBRReplaced || !rec.Inputs.ProtectiveMBR || !rec.Inputs.USBStorageOff ||
		strings.Join(rec.Inputs.EnableSysext, ",") != "zfs,podman" || rec.Inputs.ReleaseFileServer != server {
		t.Errorf("record: base %+v, inputs %+v", rec.Base, rec.Inputs)
	}
	raw := filepath.Join(dir, "out.raw")
	testutil.Run(t, "convert", qcow2, raw).MustSucceed(t)
	if out := testutil.MustRun(t, "sgdisk", "-v", raw); !strings.Contains(out, "No problems found") {
		t.Errorf("sgdisk -v of the built image:\n%s", out)
	}
	fd := strings.Join(strings.Fields(testutil.MustRun(t, "fdisk", "-l", "-t", "dos", "-o", "Start,Id", raw)), " ")
	if !strings.Contains(fd, "Start Id 1 ee") || strings.Contains(fd, " ef") {
		t.Errorf("fdisk -t dos of the built image: want the one 0xEE entry from sector 1, got: %s", fd)
	}
	rep := inspectJSON(t, raw)
	if rep.MBR.Kind != "protective" || rep.Node.ReleaseFileServer != server || !rep.Node.USBStorageOff ||
		rep.Node.USBStorageFile != node.USBStorageConf || strings.Join(rep.Node.EnabledSysext, ",") != "zfs,podman" {
		t.Errorf("inspect -o json: mbr %+v, node %+v", rep.MBR, rep.Node)
	}
	if !strings.Contains(" "+rep.OEM.Settings.LinuxAppend+" ", " "+node.ReleaseFileServerArg+"="+server+" ") {
		t.Errorf("linux_append %q lacks %s", rep.OEM.Settings.LinuxAppend, node.ReleaseFileServerArg)
	}
	text := testutil.Run(t, "inspect", raw, "--for", "openstack").Stdout
	for _, want := range []string{"MBR:        protective", "USB storage: off (" + node.USBStorageConf + ")",
		"Official extensions: zfs, podman", "Release file server: " + server} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect does not show %q:\n%s", want, text)
		}
	}
	// What the node's kmod and Flatcar read, from ROOT.
	root := rootfstest.ExtractRoot(t, raw)
	rootfstest.Fsck(t, root, "of the built image's ROOT")
	conf := filepath.Join(dir, "usb.conf")
	testutil.MustRun(t, "debugfs", "-R", "dump "+node.USBStorageConf+" "+conf, root)
	if out := testutil.MustRun(t, "modprobe", "--dry-run", "--verbose", "--config", conf, "usb-storage"); !strings.Contains(out, "install /bin/false") {
		t.Errorf("modprobe with the baked %s would load usb-storage: %q", node.USBStorageConf, out)
	}
	enabled := filepath.Join(dir, "enabled")
	testutil.MustRun(t, "debugfs", "-R", "dump "+node.EnabledSysextConf+" "+enabled, root)
	if b, _ := os.ReadFile(enabled); string(b) != "zfs\npodman\n" {
		t.Errorf("%s = %q", node.EnabledSysextConf, b)
	}

	// --keep-usb-storage, from FLATCAR_CAPO_KEEP_USB_STORAGE: no file, inspect says it is on.
	out2 := filepath.Join(dir, "keep")
	testutil.RunCmd(t, testutil.Cmd{Args: args(out2), Env: []string{"FLATCAR_CAPO_KEEP_USB_STORAGE=true"}}).MustSucceed(t)
	raw2 := filepath.Join(dir, "keep.raw")
	testutil.Run(t, "convert", filepath.Join(out2, filepath.Base(qcow2)), raw2).MustSucceed(t)
	if rep := inspectJSON(t, raw2); rep.Node.USBStorageOff || len(rep.Node.EnabledSysext) != 0 || rep.Node.ReleaseFileServer != "" || rep.MBR.Kind != "protective" {
		t.Errorf("--keep-usb-storage build: mbr %+v, node %+v", rep.MBR, rep.Node)
	}

	for _, bad := range [][]string{
		{"--enable-sysext", "zfs\nblacklist", "--enable-sysext"},
		{"--enable-sysext", "../zfs", "--enable-sysext"},
		{"--release-file-server", "ftp://mirror.example/flatcar", "http(s) URL"},
		{"--release-file-server", "https://user:pw@mirror.example/", "without credentials"},
		{"--release-file-server", "https://mirror.example/a$(reboot)", "kernel argument"},
		{"--release-file-server", "https://mirror.example/%7Eflatcar", "kernel argument"},
	} {
		testutil.Run(t, args(filepath.Join(dir, "bad"), bad[0], bad[1])...).MustFail(t, 2, bad[2])
	}
}

type inspectReport struct {
	MBR struct {
		Kind string `json:"kind"`
	} `json:"mbr"`
	OEM struct {
		Settings struct {
			LinuxAppend string `json:"linux_append"`
		} `json:"settings"`
	} `json:"oem"`
	Node struct {
		USBStorageOff     bool     `json:"usbStorageOff"`
		USBStorageFile    string   `json:"usbStorageFile"`
		EnabledSysext     []string `json:"enabledSysext"`
		ReleaseFileServer string   `json:"releaseFileServer"`
	} `json:"node"`
}

func inspectJSON(t *testing.T, raw string) inspectReport {
	t.Helper()
	res := testutil.Run(t, "inspect", raw, "--for", "openstack", "-o", "json")
	var rep inspectReport
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	return rep
}
