package imagebuild_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/ignition"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// fixture is shared by the subtests of TestBuildEndToEnd: one signed stand-in release, one
// Kubernetes mirror, one download cache, so full builds happen once and the image checks, the
// boot and the upload reuse their artifacts.
type fixture struct {
	srv       *fetchtest.Server
	rel       *standin.Release
	mirror    *kubetest.Mirror
	dir       string
	cache     string
	packer112 string                 // "" when packer 1.12 + plugin is not installed (then Debian's is used)
	reg       *registrytest.Registry // kubeadm's images, pulled through --registry-mirror
	pushed    *registrytest.Pushed
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	testutil.RequireTools(t, "packer", "qemu-system-x86_64", "qemu-img", "mmdebstrap")
	fx := &fixture{srv: fetchtest.NewServer(t), mirror: kubetest.New(t, kubernetes.Options{}), dir: t.TempDir()}
	fx.cache = filepath.Join(fx.dir, "cache")
	fx.reg = registrytest.Start(t)
	var err error
	if fx.pushed, err = fx.reg.PushKubeadm(context.Background(), kubetest.KubeadmImages(kubetest.Version, "")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Its /usr carries a real containerd as Flatcar's built-in sysext, so the build VM imports the
	// preloaded images (install-images.sh) and the boot reads them from containerd.
	fx.rel = standin.PublishRelease(t, fx.srv, standin.ReleaseOptions{Sysexts: []string{registrytest.ContainerdSysext(t, fx.dir)}})
	t.Logf("stand-in release %s ready in %.1fs", fx.rel.Version, time.Since(start).Seconds())
	if p := testutil.CachedPacker112(); p != "" {
		if _, err := os.Stat(p); err == nil {
			fx.packer112 = p
		}
	}
	if fx.packer112 == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("packer 1.12 + qemu plugin is not installed; scripts/install-packer.sh should have built it")
		}
		t.Logf("packer 1.12 not installed (scripts/install-packer.sh): both builds use %s", mustLook(t, "packer"))
	}
	return fx
}

func mustLook(t testing.TB, tool string) string {
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// args are the flags every build of the fixture shares.
func (fx *fixture) args(extra ...string) []string {
	a := []string{"build", "--release-server", fx.rel.ReleaseServer, "--keyring", fx.rel.Keyring,
		"--channel", fx.rel.Channel, "--version", fx.rel.Version, "--cache-dir", fx.cache, "--memory", "1024"}
	a = append(a, fx.mirror.Args()...)
	a = append(a, "--registry-mirror", "registry.k8s.io=https://"+fx.reg.Host, "--registry-ca", fx.reg.CAFile)
	return append(a, extra...)
}

func (fx *fixture) run(t testing.TB, env []string, extra ...string) testutil.Result {
	t.Helper()
	start := time.Now()
	env = append([]string{"DOCKER_CONFIG=" + fx.reg.DockerConfig}, env...)
	r := testutil.RunCmd(t, testutil.Cmd{Args: fx.args(extra...), Env: env, Dir: fx.dir})
	t.Logf("flatcar-capo %s: exit %d in %.1fs\n%s", strings.Join(extra, " "), r.Code, time.Since(start).Seconds(), r.Stderr)
	return r
}

func readRecord(t testing.TB, artifact string) *record.Record {
	t.Helper()
	rec, err := record.Read(artifact)
	if err != nil {
		t.Fatalf("build record of %s: %v", artifact, err)
	}
	return rec
}

// TestBuildEndToEnd runs the real binary with real packer and QEMU on the stand-in guest.
func TestBuildEndToEnd(t *testing.T) {
	fx := newFixture(t)
	var qemuBase, osBase string // artifacts of the two full builds
	cloud := func(t *testing.T) *openStack {
		return &openStack{env: []string{"OS_CLIENT_CONFIG_FILE=" + sharedOpenStack(t)}}
	}

	t.Run("MissingPackerGivesInstallHint", func(t *testing.T) {
		r := fx.run(t, nil, "--packer", filepath.Join(fx.dir, "no-such-packer"), "--output-dir", filepath.Join(fx.dir, "nopacker"))
		r.MustFail(t, 1, "packer")
		if !strings.Contains(strings.ToLower(r.Stderr), "install") {
			t.Fatalf("no install hint:\n%s", r.Stderr)
		}
		if len(fx.srv.Requests(".img")) != 0 || len(fx.mirror.Requests()) != 0 {
			t.Fatalf("downloads started before the tools were checked: %v %v", fx.srv.Requests(".img"), fx.mirror.Requests())
		}
		if ents, err := os.ReadDir(filepath.Join(fx.dir, "nopacker")); err == nil && !(len(ents) == 1 && isBuildLock(ents[0].Name())) {
			t.Fatal("the output directory was created with more than build's lock")
		}
	})

	t.Run("DryRunBootsNothing", func(t *testing.T) {
		out := filepath.Join(fx.dir, "dry")
		r := fx.run(t, nil, "--dry-run", "--base", "openstack", "--output-dir", out).MustSucceed(t)
		name := imagebuild.DefaultImageName(imagebuild.MethodPacker, fx.rel.Channel, fx.rel.Version, kubetest.Version)
		for _, want := range []string{fx.rel.Version, kubetest.Version, name, "flatcar_production_openstack_image.img",
			fx.mirror.File("bin/kubelet").URL, "accelerator", "source \"qemu\"", "KUBERNETES_VERSION=" + kubetest.Version} {
			if !strings.Contains(r.Stdout, want) {
				t.Fatalf("plan lacks %q:\n%s", want, r.Stdout)
			}
		}
		if len(fx.srv.Requests(".img")) != 0 || len(fx.mirror.Requests()) != 0 {
			t.Fatal("--dry-run downloaded something")
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatal("--dry-run created the output directory")
		}
		js := fx.run(t, nil, "--dry-run", "-o", "json", "--output-dir", out).MustSucceed(t)
		var rec imagebuild.Result
		if err := json.Unmarshal([]byte(js.Stdout), &rec); err != nil || rec.Plan == nil || rec.Plan.ImageName != name {
			t.Fatalf("-o json plan: %v\n%s", err, js.Stdout)
		}
	})

	t.Run("WrongSHA256FailsBeforeBoot", func(t *testing.T) {
		fx.mirror.WrongSHA256("bin/kubelet", true)
		defer fx.mirror.WrongSHA256("bin/kubelet", false)
		out := filepath.Join(fx.dir, "badsum")
		r := fx.run(t, nil, "--output-dir", out)
		r.MustFail(t, 1, "kubelet", kubetest.BadSHA256, fx.mirror.SHA256("bin/kubelet"))
		if strings.Contains(r.Stderr, "packer:") {
			t.Fatalf("packer ran after a checksum mismatch:\n%s", r.Stderr)
		}
		assertNoArtifact(t, out)
	})

	t.Run("Packer112QemuBaseFwCfg", func(t *testing.T) {
		out := filepath.Join(fx.dir, "qemu-base")
		extra := []string{"--base", "qemu", "--output-dir", out}
		if fx.packer112 != "" {
			extra = append(extra, "--packer", fx.packer112)
		}
		r := fx.run(t, nil, extra...).MustSucceed(t)
		rec := checkBuilt(t, r, out, fx)
		if rec.Tools.BuildVMConfig != "fw_cfg" {
			t.Fatalf("build VM config %q, want fw_cfg", rec.Tools.BuildVMConfig)
		}
		if fx.packer112 != "" && !strings.HasPrefix(rec.Tools.Packer, "1.12") {
			t.Fatalf("built with packer %q, want 1.12", rec.Tools.Packer)
		}
		qemuBase = imagebuild.ArtifactPath(&imagebuild.Options{OutputDir: out, ImageName: rec.ImageName})
	})

	t.Run("ImageContents", func(t *testing.T) {
		if qemuBase == "" {
			t.Fatal("no artifact: the qemu-base build failed")
		}
		checkImage(t, fx, qemuBase)
	})

	t.Run("RerunReusesAndUploadsToGlance", func(t *testing.T) {
		if qemuBase == "" {
			t.Fatal("no artifact: the qemu-base build failed")
		}
		stack := cloud(t)
		before := readRecord(t, qemuBase)
		extra := []string{"--base", "qemu", "--output-dir", filepath.Dir(qemuBase), "--cloud", "local", "-o", "json"}
		if fx.packer112 != "" {
			extra = append(extra, "--packer", fx.packer112)
		}
		r := fx.run(t, stack.env, extra...).MustSucceed(t)
		if !strings.Contains(r.Stderr, "reusing") || strings.Contains(r.Stderr, "packer:") {
			t.Fatalf("the re-run did not reuse the artifact:\n%s", r.Stderr)
		}
		var rec record.Record
		if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil {
			t.Fatalf("-o json: %v\n%s", err, r.Stdout)
		}
		if !rec.Reused || len(rec.Glance) != 1 || rec.Glance[0].ID == "" || rec.Artifacts[0].SHA512 != before.Artifacts[0].SHA512 {
			t.Fatalf("record after reuse+upload: %+v", rec)
		}
		if onDisk := readRecord(t, qemuBase); len(onDisk.Glance) != 1 || onDisk.Glance[0].ID != rec.Glance[0].ID {
			t.Fatalf("the record on disk lacks the Glance ID: %+v", onDisk.Glance)
		}
		// `upload` alone takes the properties from the build record.
		up := testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", qemuBase, "--name", "from-record", "--cloud", "local", "-o", "json"},
			Env: stack.env}).MustSucceed(t)
		var res []struct{ Properties map[string]string }
		if err := json.Unmarshal([]byte(up.Stdout), &res); err != nil || len(res) != 1 {
			t.Fatalf("upload -o json: %v\n%s", err, up.Stdout)
		}
		p := res[0].Properties
		if p["os_version"] != fx.rel.Version || p["kubernetes_version"] != kubetest.Version || p["architecture"] != "x86_64" {
			t.Fatalf("properties from the build record: %v", p)
		}
	})

	t.Run("Packer166OpenstackBaseConfigDrive", func(t *testing.T) {
		out := filepath.Join(fx.dir, "openstack-base")
		script := filepath.Join(fx.dir, "provision.sh")
		os.WriteFile(script, []byte("#!/bin/sh\nset -e\necho \"$KUBERNETES_VERSION\" > /etc/provisioned-by-user\n"), 0o644)
		r := fx.run(t, nil, "--base", "openstack", "--packer", mustLook(t, "packer"), "--output-dir", out,
			"--image-name", "flatcar-capo-test-openstack", "--disk-size", "4G", "--provision", script).MustSucceed(t)
		rec := checkBuilt(t, r, out, fx)
		if rec.Tools.BuildVMConfig != "config-2" || !strings.HasPrefix(rec.Tools.Packer, "1.6") {
			t.Fatalf("build VM config %q with packer %q, want config-2 with 1.6.x", rec.Tools.BuildVMConfig, rec.Tools.Packer)
		}
		osBase = filepath.Join(out, "flatcar-capo-test-openstack.qcow2")
		// The grown disk's backup GPT header sits in its last sector again.
		img, err := disk.Open(osBase, false)
		if err != nil {
			t.Fatal(err)
		}
		hdr := make([]byte, 8)
		img.ReadAt(hdr, img.Size()-512)
		img.Close()
		if string(hdr) != "EFI PART" {
			t.Fatalf("no backup GPT header in the last sector of the --disk-size 4G image: %q", hdr)
		}
		root, done := openRoot(t, osBase)
		marker := string(root.read("/etc/provisioned-by-user"))
		done()
		if strings.TrimSpace(marker) != kubetest.Version {
			t.Fatalf("--provision script's file: %q", marker)
		}
		ins := testutil.Run(t, "inspect", osBase, "--for", "openstack", "-o", "json")
		var rep struct {
			Size    int64
			Verdict string
		}
		json.Unmarshal([]byte(ins.Stdout), &rep)
		if rep.Size != 4<<30 || rep.Verdict == "NOT READY" {
			t.Fatalf("inspect of the --disk-size 4G image: size %d verdict %q\n%s%s", rep.Size, rep.Verdict, ins.Stdout, ins.Stderr)
		}
	})

	t.Run("OutputBootsFromConfigDrive", func(t *testing.T) {
		image := osBase
		if image == "" {
			image = qemuBase
		}
		if image == "" {
			t.Fatal("no artifact to boot")
		}
		ign, key := standin.TestUser(t)
		drive := filepath.Join(t.TempDir(), "config-2.iso")
		if err := configdrive.Write(drive, ign, configdrive.MetaData{UUID: "6f1d2c3e-0000-4000-8000-000000000009", Name: "node", Hostname: "node"}); err != nil {
			t.Fatal(err)
		}
		g := standin.Boot(t, image, standin.BootOptions{ConfigDrive: drive, Snapshot: true, Key: key, Timeout: 600 * time.Second, Memory: 1536})
		cmdline, err := g.Cmdline()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cmdline, "flatcar.oem.id=openstack") || strings.Contains(cmdline, "flatcar.autologin") {
			t.Fatalf("kernel command line %q", cmdline)
		}
		for cmd, want := range map[string]string{
			"systemctl show kubeadm.service -p After":      "containerd.service",
			"/opt/bin/kubeadm version":                     kubetest.Version,
			"systemctl is-enabled kubelet.service":         "enabled",
			"id " + ignition.DefaultUser + " || echo gone": "gone",
			"cat /etc/machine-id":                          "",
		} {
			got, err := g.SSH(cmd)
			if err != nil && want != "gone" {
				t.Fatalf("%s: %v\n%s", cmd, err, got)
			}
			if !strings.Contains(got, want) {
				t.Fatalf("%s: %q lacks %q", cmd, got, want)
			}
		}
		// The Packer method's proof of preloading: the images the build VM imported, offline.
		preloadProof{reg: fx.reg, pushed: fx.pushed, inVM: true}.check(t, g)
	})

	t.Run("CtrlCDuringPackerLeavesNothing", func(t *testing.T) {
		out := filepath.Join(fx.dir, "interrupted")
		cmd := exec.Command(testutil.Binary(t), fx.args("--base", "qemu", "--output-dir", out, "--force")...)
		cmd.Dir = fx.dir
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+fx.reg.DockerConfig)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		output := startUntilQEMU(t, cmd, out, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // what a terminal's Ctrl-C does
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("build did not stop after Ctrl-C\n%s", output())
		}
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("exit code %d, want 130\n%s", code, output())
		}
		if q := qemuUsing(out); len(q) > 0 {
			t.Fatalf("QEMU left running: %v", q)
		}
		assertNoArtifact(t, out)
		// It says what it really left (the packer log), not that it cannot tell.
		if msg := output(); strings.Contains(msg, "did not say what it left behind") || !strings.Contains(msg, "left behind:\n  - the build's log") {
			t.Errorf("Ctrl-C report:\n%s", msg)
		}
	})

	// kill -9 of flatcar-capo: packer, its plugin and QEMU die too (the watchdog), not just when
	// Ctrl-C lets it stop them.
	t.Run("KillDuringPackerLeavesNoProcess", func(t *testing.T) {
		out := filepath.Join(fx.dir, "killed")
		cmd := exec.Command(testutil.Binary(t), fx.args("--base", "qemu", "--output-dir", out, "--force")...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+fx.reg.DockerConfig) // the registry login for the preloaded images
		cmd.Dir = fx.dir
		startUntilQEMU(t, cmd, out, func() { cmd.Process.Kill() })
		below := descendants(cmd.Process.Pid)
		cmd.Process.Signal(syscall.SIGKILL) // flatcar-capo alone, as the OOM killer or a CI timeout does
		cmd.Wait()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var alive []string
			for _, p := range below {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil && len(b) > 0 {
					alive = append(alive, fmt.Sprintf("%d %s", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
				}
			}
			if len(alive) == 0 && len(qemuUsing(out)) == 0 {
				break
			}
			if time.Now().After(deadline) {
				for _, p := range below {
					syscall.Kill(p, syscall.SIGKILL)
				}
				t.Fatalf("90 s after kill -9 of flatcar-capo, still running:\n%s", strings.Join(alive, "\n"))
			}
			time.Sleep(time.Second)
		}
		if len(below) < 3 {
			t.Errorf("processes below flatcar-capo: %v, want at least the watchdog, packer and QEMU", below)
		}
	})
}

// descendants lists the processes below pid, from /proc's parent links.
func descendants(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		var p, pp int
		var state string
		fmt.Sscan(string(b[:bytes.IndexByte(b, ' ')]), &p)
		fmt.Sscan(string(b[i+1:]), &state, &pp)
		children[pp] = append(children[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
		queue = queue[1:]
	}
	return out
}

// checkBuilt checks a successful build's output and record.
// startUntilQEMU starts the build cmd and returns once a QEMU of out runs, with the build's
// output so far and to come (complete once cmd.Wait returned). QEMU is looked for every 200 ms
// (not only when a line arrives: packer may print its last line before QEMU is up and the next
// only after SSH); a build that ends first fails the test at once with its output, and after
// 5 minutes kill stops it.
func startUntilQEMU(t *testing.T, cmd *exec.Cmd, out string, kill func()) (output func() string) {
	t.Helper()
	var buf lockedBuffer
	cmd.Stderr = &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		for processRuns(cmd.Process.Pid) {
			time.Sleep(100 * time.Millisecond)
		}
		close(exited)
	}()
	for deadline := time.Now().Add(5 * time.Minute); len(qemuUsing(out)) == 0; {
		select {
		case <-exited:
			cmd.Wait()
			t.Fatalf("the build ended before QEMU started:\n%s", buf.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			kill()
			t.Fatalf("QEMU never started:\n%s", buf.String())
		}
	}
	return buf.String
}

// processRuns says whether pid runs and is not a zombie (a child nobody waited for yet).
func processRuns(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func checkBuilt(t *testing.T, r testutil.Result, out string, fx *fixture) *record.Record {
	t.Helper()
	qcows, _ := filepath.Glob(filepath.Join(out, "*.qcow2"))
	if len(qcows) != 1 {
		t.Fatalf("artifacts in %s: %v", out, qcows)
	}
	artifact := qcows[0]
	rec := readRecord(t, artifact)
	if rec.FlatcarVersion != fx.rel.Version || rec.KubernetesVersion != kubetest.Version || rec.Arch != "amd64" ||
		rec.Method != imagebuild.MethodPacker || rec.Flavor != "baked" {
		t.Fatalf("record %+v", rec)
	}
	// Packer's copy of the disk has no holes; the artifact must still store only the data
	// (the stand-in's 3 GiB disk holds ~0.5 GiB), not the virtual size.
	if st, err := os.Stat(artifact); err != nil {
		t.Fatal(err)
	} else if st.Size() > 3<<30/2 {
		t.Fatalf("artifact %s is %d bytes for a 3 GiB disk: zeros stored", artifact, st.Size())
	}
	sum := sha512sum(t, artifact)
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].SHA512 != sum {
		t.Fatalf("record sha512 %+v, file %s", rec.Artifacts, sum)
	}
	if len(rec.Downloads) != 5 || len(rec.Steps) < 10 {
		t.Fatalf("record downloads %d steps %d", len(rec.Downloads), len(rec.Steps))
	}
	for _, want := range []string{"OPENSTACK_FLATCAR_IMAGE_NAME=" + rec.ImageName, "flatcar-capo manifests --flavor baked --image-name " + rec.ImageName} {
		if !strings.Contains(r.Stdout, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, r.Stdout)
		}
	}
	if !strings.Contains(r.Stderr, "[1/") || !strings.Contains(r.Stderr, "packer") {
		t.Fatalf("no progress lines:\n%s", r.Stderr)
	}
	// The build VM runs the base image's containerd: install-images.sh imported the images there.
	if want := fmt.Sprintf("%d images imported into containerd's k8s.io namespace and pinned", len(fx.pushed.Refs)); !strings.Contains(r.Stderr, want) ||
		strings.Contains(r.Stderr, "the first boot imports them") {
		t.Fatalf("the build VM did not import the images (want %q):\n%s", want, r.Stderr)
	}
	var leftovers []string
	dots, _ := filepath.Glob(filepath.Join(out, ".*"))
	for _, f := range dots {
		if !isBuildLock(filepath.Base(f)) {
			leftovers = append(leftovers, f)
		}
	}
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left in %s: %v", out, leftovers)
	}
	return rec
}

// checkImage reads the artifact itself: ROOT through go-diskfs, the OEM and ESP through inspect.
func checkImage(t *testing.T, fx *fixture, image string) {
	root, done := openRoot(t, image)
	defer done()
	for _, b := range []string{"kubeadm", "kubelet", "kubectl"} {
		if got, want := root.sha256("/opt/bin/"+b), fx.mirror.SHA256("bin/"+b); got != want {
			t.Errorf("/opt/bin/%s sha256 %s, want %s", b, got, want)
		}
	}
	if got := string(root.read("/opt/bin/crictl")); got != string(kubetest.Script("crictl", kubetest.Crictl)) {
		t.Errorf("/opt/bin/crictl is not the one from the tarball: %q", got)
	}
	for _, p := range kubetest.CNIPlugins {
		root.read("/opt/cni/bin/" + p)
	}
	// The preloaded images.
	var list images.List
	if err := json.Unmarshal(root.read(node.ImagesList), &list); err != nil || len(list.Images) != 7 {
		t.Errorf("%s: %v, %d images", node.ImagesList, err, len(list.Images))
	}
	for _, im := range list.Images {
		if im.Digest != fx.pushed.Digest[im.Name] {
			t.Errorf("preloaded %s %s, pushed %s", im.Name, im.Digest, fx.pushed.Digest[im.Name])
		}
	}
	// Imported in the build VM: the blobs are in containerd's content store, the archive is gone.
	if !root.absent(node.ImagesArchive) {
		t.Errorf("%s is still in the image after the build VM's import: images stored twice", node.ImagesArchive)
	}
	for _, ref := range fx.pushed.Refs {
		d := strings.TrimPrefix(fx.pushed.Manifest[ref], "sha256:")
		if root.entry("/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256/"+d) == nil {
			t.Errorf("%s: manifest %s is not in containerd's content store in ROOT", ref, d)
		}
	}
	if root.entry(node.ImportWants) == nil || !strings.Contains(string(root.read(node.ContainerdConfDropIn)), "SystemdCgroup = true") {
		t.Errorf("import unit not enabled or containerd drop-in missing")
	}
	if !strings.Contains(string(root.read(node.ContainerdCertsDir+"/registry.k8s.io/hosts.toml")), fx.reg.Host) {
		t.Errorf("hosts.toml does not name the mirror")
	}
	if unit := string(root.read("/etc/systemd/system/kubelet.service")); !strings.Contains(unit, "/opt/bin/kubelet") {
		t.Errorf("kubelet.service: %s", unit)
	}
	root.read("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
	// CABPK's kubeadm.sh calls plain `kubeadm`: /opt/bin must be on the units' PATH.
	if conf := string(root.read(node.ServicePathConf)); !strings.Contains(conf, "DefaultEnvironment=\"PATH=") || !strings.Contains(conf, node.BinDir) {
		t.Errorf("%s does not put %s on the units' PATH:\n%s", node.ServicePathConf, node.BinDir, conf)
	}
	if root.entry("/etc/systemd/system/multi-user.target.wants/kubelet.service") == nil {
		t.Errorf("kubelet.service is not enabled: %v", root.names("/etc/systemd/system/multi-user.target.wants"))
	}
	ordered := false
	for _, n := range root.names("/etc/systemd/system/kubeadm.service.d") {
		if strings.Contains(string(root.read("/etc/systemd/system/kubeadm.service.d/"+n)), "After=containerd.service") {
			ordered = true
		}
	}
	if !ordered {
		t.Errorf("no kubeadm.service drop-in orders it after containerd.service")
	}
	for _, unit := range []string{"update-engine.service", "locksmithd.service"} {
		if root.entry("/etc/systemd/system/"+unit) == nil {
			t.Errorf("%s is not masked", unit)
		}
	}
	if !root.absent("/etc/machine-id") {
		t.Errorf("/etc/machine-id is in the image")
	}
	for _, n := range root.names("/etc/ssh") {
		if strings.HasPrefix(n, "ssh_host_") && !root.absent("/etc/ssh/"+n) {
			t.Errorf("SSH host key /etc/ssh/%s is in the image", n)
		}
	}
	if root.entry("/etc/passwd") != nil && strings.Contains(string(root.read("/etc/passwd")), ignition.DefaultUser+":") {
		t.Errorf("the build user is still in /etc/passwd")
	}
	if !root.absent("/home/"+ignition.DefaultUser) || !root.absent("/etc/sudoers.d/"+ignition.DefaultUser) {
		t.Errorf("the build user's home or sudoers file is in the image")
	}
	if e := root.entry("/tmp/flatcar-capo/payload"); e != nil {
		t.Errorf("the payload directory is in the image")
	}
	r := testutil.Run(t, "inspect", image, "--for", "openstack", "-o", "json")
	var rep struct {
		Verdict string
		OEM     struct {
			Settings struct {
				OEMID       string `json:"oem_id"`
				LinuxAppend string `json:"linux_append"`
			}
		}
		FirstBoot *bool
		ConfigIgn bool
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if rep.Verdict == "NOT READY" || rep.OEM.Settings.OEMID != "openstack" || strings.Contains(rep.OEM.Settings.LinuxAppend, "autologin") ||
		rep.FirstBoot == nil || !*rep.FirstBoot || rep.ConfigIgn {
		t.Errorf("inspect: %s", r.Stdout)
	}
}

// isBuildLock is build's .NAME.qcow2.lock, kept next to the artifact by design.
func isBuildLock(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".lock")
}

func assertNoArtifact(t *testing.T, out string) {
	t.Helper()
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") || isBuildLock(e.Name()) {
			continue // the packer log, named in the failure message; build's lock stays by design
		}
		t.Errorf("left in %s after the failure: %s", out, e.Name())
	}
}

// qemuUsing lists the QEMU processes whose command line names dir.
func qemuUsing(dir string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cmd, "qemu-system") && strings.Contains(cmd, dir) {
			found = append(found, p+": "+cmd)
		}
	}
	return found
}

func sha512sum(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sha512sum", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))[0]
}

// openStack is the package's Keystone + Glance on 127.0.0.1 (sharedOpenStack), as the
// environment of a command that uses it.
type openStack struct{ env []string }
