package imagebuild_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// Secrets that the URLs of this test carry as userinfo; none may appear in any output or record.
var urlSecrets = []string{"RelSrv-s3cret", "K8sMirror-s3cret", "GhMirror-s3cret", "Sysext-s3cret"}

func withUserinfo(u, secret string) string {
	return strings.Replace(u, "http://", "http://ci-user:"+secret+"@", 1)
}

// reproducibleNoSecrets is issue 19's CI runner pair, against the real Keystone + Glance on
// 127.0.0.1 (TestBuildSysextCloud's) and a signed release on 127.0.0.1 whose image is a
// Flatcar-layout disk:
//   - every command that shows a URL (release, fetch, build --dry-run, build, sysext create,
//     upload), given URLs with credentials (--release-server, --kubernetes-mirror,
//     --github-mirror, --sysext), shows and stores none of them (stdout, stderr, -o json, the
//     0644 build record);
//   - `build --method sysext` twice on separate cache and output directories (the second with the
//     first's sysext by URL) gives the same sha512, and the second upload reuses the first's
//     Glance image;
//   - one build given the same Glance three times (--cloud local twice, and local-again, another
//     clouds.yaml name for the same endpoint and project) uploads once;
//   - kill -9 of a build leaves its build directory; the next run there removes it and says so;
//   - a failing build -o json writes an error object on stdout and exits 1.
func reproducibleNoSecrets(t *testing.T, stackClouds string) {
	dir := t.TempDir()
	clouds := cloudsWithAlias(t, stackClouds, "local", "local-again")
	env := []string{"OS_CLIENT_CONFIG_FILE=" + clouds}
	mirror := kubetest.New(t, kubernetes.Options{})

	// The release: a Flatcar-layout disk as the openstack image (qcow2, as Flatcar publishes it).
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, OEMID: "openstack"})
	q := filepath.Join(dir, "base.qcow2")
	testutil.Run(t, "convert", base, q).MustSucceed(t)
	content, err := os.ReadFile(q)
	if err != nil {
		t.Fatal(err)
	}
	srv := fetchtest.NewServer(t)
	key := fetchtest.NewKey(t, "Test Buildbot", time.Now())
	keyring := filepath.Join(dir, "keyring.asc")
	os.WriteFile(keyring, key.PublicArmored(t), 0o644)
	srv.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: "4459.2.0", Image: "openstack",
		Content: content, Signer: key.Current, Key: key, SignedAt: time.Now().Add(-time.Hour), Current: true, WithoutBZ2: true})
	relServer := withUserinfo(srv.ReleaseServer(), urlSecrets[0])
	mirrorArgs := []string{"--kubernetes-mirror", withUserinfo(mirror.KubernetesMirror(), urlSecrets[1]),
		"--github-mirror", withUserinfo(mirror.GitHubMirror(), urlSecrets[2]),
		"--kubernetes-version", mirror.Options.Kubernetes, "--crictl-version", mirror.Options.Crictl, "--cni-version", mirror.Options.CNI}

	var shown []string // every output, checked for secrets at the end
	run := func(args ...string) testutil.Result {
		t.Helper()
		r := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: env})
		shown = append(shown, strings.Join(args[:1], " ")+":\n"+r.Combined())
		return r
	}
	buildArgs := func(n string, extra ...string) []string {
		a := []string{"build", "--method", "sysext", "--no-preload-images", "--image-name", "flatcar-issue19",
			"--release-server", relServer, "--keyring", keyring,
			"--cache-dir", filepath.Join(dir, n, "cache"), "--output-dir", filepath.Join(dir, n, "out")}
		return append(append(a, mirrorArgs...), extra...)
	}

	run("release", "--release-server", relServer, "-o", "json").MustSucceed(t)
	run("release", "--release-server", relServer).MustSucceed(t)
	run("fetch", "--release-server", relServer, "--keyring", keyring, "--image", "openstack", "--cache-dir", filepath.Join(dir, "fetch"),
		"--output-file", filepath.Join(dir, "fetched.img"), "-o", "json").MustSucceed(t)
	run(buildArgs("dry", "--dry-run", "-o", "json")...).MustSucceed(t)
	run(buildArgs("dry", "--dry-run")...).MustSucceed(t)
	run(append([]string{"sysext", "create", "--output-file", filepath.Join(dir, "k.raw"), "--cache-dir", filepath.Join(dir, "sx")}, mirrorArgs...)...).MustSucceed(t)

	// Runner A: makes the sysext; the same Glance named three times.
	r := run(buildArgs("a", "--cloud", "local", "--cloud", "local", "--cloud", "local-again", "-o", "json")...).MustSucceed(t)
	var recA record.Record
	if err := json.Unmarshal([]byte(r.Stdout), &recA); err != nil {
		t.Fatalf("build -o json: %v\n%s", err, r.Stdout)
	}
	if len(recA.Glance) != 2 || recA.Glance[0].Cloud != "local" || recA.Glance[1].Cloud != "local-again" ||
		recA.Glance[0].ID == "" || recA.Glance[1].ID != recA.Glance[0].ID || recA.Glance[0].Action != "uploaded" {
		t.Errorf("one Glance given three times: %+v, want local uploaded once and local-again with the same image", recA.Glance)
	}
	if !strings.Contains(r.Stderr, "local-again/RegionOne: the same Glance and project as local/RegionOne; uploading once") {
		t.Errorf("no line about the duplicate Glance:\n%s", r.Stderr)
	}
	name := recA.ImageName
	artA := filepath.Join(dir, "a", "out", name+".qcow2")

	// Runner B: empty cache and output, the sysext by URL (with credentials).
	sx := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, "a", "out"))))
	defer sx.Close()
	sysextURL := withUserinfo(sx.URL, urlSecrets[3]) + "/kubernetes-" + mirror.Options.Kubernetes + "-x86-64.raw"
	r = run(buildArgs("b", "--sysext", sysextURL, "--cloud", "local", "-o", "json")...)
	artB := filepath.Join(dir, "b", "out", name+".qcow2")
	if a, b := testutil.SHA512File(t, artA), testutil.SHA512File(t, artB); a != b {
		t.Fatalf("two builds of the same inputs differ: sha512 %.16s… and %.16s…\n%s", a, b, r.Stderr)
	}
	r.MustSucceed(t)
	var recB record.Record
	if err := json.Unmarshal([]byte(r.Stdout), &recB); err != nil {
		t.Fatalf("build -o json: %v\n%s", err, r.Stdout)
	}
	if len(recB.Glance) != 1 || recB.Glance[0].ID != recA.Glance[0].ID || recB.Glance[0].Action != "reused" {
		t.Errorf("runner B's upload: %+v, want runner A's image %s reused", recB.Glance, recA.Glance[0].ID)
	}
	contains(t, run("upload", artB, "--name", name, "--cloud", "local", "-o", "json").MustSucceed(t), recA.Glance[0].ID, `"action": "reused"`)
	checkGlanceImage(t, clouds, recA.Glance[0].ID, name, testutil.SHA512File(t, artA))

	// kill -9 in the middle of a build, then a rerun in the same output directory.
	outC := filepath.Join(dir, "c", "out")
	killDuringBuild(t, env, buildArgs("c"))
	left, _ := filepath.Glob(filepath.Join(outC, ".build-*"))
	if len(left) != 1 {
		t.Fatalf("after kill -9: build directories %v, want the dead run's one", left)
	}
	tmp := filepath.Join(outC, "."+name+".qcow2.tmp-1234") // as atomicfile names a partial output
	os.WriteFile(tmp, []byte("partial"), 0o600)
	contains(t, run(buildArgs("c")...).MustSucceed(t), "removed "+left[0]+", left by a run that was killed (pid", "removed "+tmp)
	rest, _ := filepath.Glob(filepath.Join(outC, ".*"))
	for _, p := range rest {
		if !strings.HasSuffix(p, ".qcow2.lock") { // the artifact lock stays by design
			t.Errorf("left in the output directory after the rerun: %s", p)
		}
	}

	// A failure with -o json: the error object on stdout.
	r = run(buildArgs("d", "--kubernetes-version", "v1.33.99", "-o", "json")...).MustFail(t, 1)
	var je struct {
		Error    string   `json:"error"`
		ExitCode int      `json:"exitCode"`
		Left     []string `json:"left"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &je); err != nil || je.Error == "" || je.ExitCode != 1 || je.Left == nil {
		t.Errorf("build -o json failure: stdout %q (%v), want an error object", r.Stdout, err)
	}

	for _, rec := range []string{artA, artB, filepath.Join(outC, name+".qcow2")} {
		p := rec + ".build.json"
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
			t.Errorf("%s is %v", p, st.Mode().Perm())
		}
		shown = append(shown, p+":\n"+string(b))
	}
	for _, out := range shown {
		for _, s := range urlSecrets {
			if strings.Contains(out, s) {
				t.Errorf("the secret %q appears in %s", s, out)
			}
		}
	}
}

func contains(t *testing.T, r testutil.Result, frags ...string) {
	t.Helper()
	for _, f := range frags {
		if !strings.Contains(r.Combined(), f) {
			t.Errorf("output lacks %q:\n%s", f, r.Combined())
		}
	}
}

// killDuringBuild starts the build and kills it with SIGKILL once its build directory exists.
func killDuringBuild(t *testing.T, env, args []string) {
	t.Helper()
	cmd := exec.Command(testutil.Binary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "] workdir") {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	cmd.Wait()
}

// cloudsWithAlias copies the clouds.yaml at path with one more name for the cloud from.
func cloudsWithAlias(t *testing.T, path, from, alias string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["clouds"][alias] = doc["clouds"][from]
	out, _ := yaml.Marshal(doc)
	p := filepath.Join(filepath.Dir(path), "clouds-alias.yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkGlanceImage: the image is active under name, qcow2, and Glance's sha512 of its data is
// want.
func checkGlanceImage(t *testing.T, clouds, id, name, want string) {
	t.Helper()
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	ctx := context.Background()
	c, err := glance.Connect(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.Get(ctx, c.Image, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != name || img.Status != images.ImageStatusActive || img.DiskFormat != "qcow2" {
		t.Errorf("Glance image %s: name %q status %q format %q", img.ID, img.Name, img.Status, img.DiskFormat)
	}
	if fmt.Sprint(img.Properties["os_hash_value"]) != want {
		t.Errorf("Glance os_hash_value %v, artifact sha512 %q", img.Properties["os_hash_value"], want)
	}
}
