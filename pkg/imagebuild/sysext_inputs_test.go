package imagebuild_test

import (
	"net/http"
	"net/http/httptest"
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
)

// TestBuildSysextPrebuiltAirGapped bakes a prebuilt --sysext with every mirror dead (an
// air-gapped site): nothing is downloaded, the record's seconds is the build's wall time, a
// re-run reuses, a changed file at the same path rebuilds (reuse is keyed on its sha512), and so
// does a flatcar-capo whose kubeadm drop-in changed (reuse is keyed on the node files it bakes).
func TestBuildSysextPrebuiltAirGapped(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	prebuilt := filepath.Join(dir, sysextFile)
	testutil.Run(t, append([]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--output-file", prebuilt}, mirror.Args()...)...).MustSucceed(t)

	out := filepath.Join(dir, "out")
	args := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0", "--sysext", prebuilt,
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out,
		"--kubernetes-mirror", "http://127.0.0.1:9/release", "--github-mirror", "http://127.0.0.1:9"}
	artifact := filepath.Join(out, "flatcar-stable-4459.2.0-kube-v1.33.4-sysext.qcow2")

	dry := testutil.Run(t, append(args, "--dry-run")...).MustSucceed(t)
	if strings.Contains(dry.Stdout+dry.Stderr, "127.0.0.1:9") {
		t.Errorf("--dry-run plans Kubernetes downloads although --sysext is given:\n%s%s", dry.Stdout, dry.Stderr)
	}

	res := testutil.Run(t, args...).MustSucceed(t)
	if !strings.Contains(res.Stdout+res.Stderr, "skipped: --sysext gives the Kubernetes sysext") {
		t.Errorf("the kubernetes step did not say it skipped the downloads:\n%s%s", res.Stdout, res.Stderr)
	}
	rec := readRecord(t, artifact)
	if len(rec.Downloads) != 0 {
		t.Errorf("record lists downloads %v; nothing should have been downloaded", rec.Downloads)
	}
	var sum float64
	for _, s := range rec.Steps {
		sum += s.Seconds
	}
	if rec.Seconds <= 0 || rec.Seconds < sum {
		t.Errorf("record seconds %.3f: want > 0 and >= the steps' sum %.3f (%+v)", rec.Seconds, sum, rec.Steps)
	}
	if want := testutil.SHA512File(t, prebuilt) + ":" + filepath.Base(prebuilt); len(rec.Inputs.Sysext) != 1 || rec.Inputs.Sysext[0] != want {
		t.Errorf("inputs.sysext = %v, want [%s]", rec.Inputs.Sysext, want)
	}

	testutil.Run(t, args...).MustSucceed(t)
	if rec := readRecord(t, artifact); !rec.Reused {
		t.Fatal("a re-run with the same sysext content did not reuse the artifact")
	}

	// Same path, other content: 4 KiB more padding (still a valid, padded squashfs).
	f, err := os.OpenFile(prebuilt, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res = testutil.Run(t, args...).MustSucceed(t)
	rec = readRecord(t, artifact)
	if rec.Reused || !strings.Contains(res.Stdout+res.Stderr, "was built from other inputs; rebuilding") {
		t.Fatalf("a changed --sysext at the same path reused the stale image (reused=%v):\n%s%s", rec.Reused, res.Stdout, res.Stderr)
	}
	newSum := testutil.SHA512File(t, prebuilt)
	found := false
	for _, a := range rec.Artifacts {
		found = found || (a.File == sysextFile && a.SHA512 == newSum)
	}
	if !found {
		t.Errorf("the rebuilt record's artifacts %+v lack %s with the new sha512 %.12s", rec.Artifacts, sysextFile, newSum)
	}

	// A flatcar-capo whose kubeadm drop-in changed (an upgrade, or an edit of pkg/node as before
	// make demo) rebuilds instead of reusing the image baked with the old drop-in, and bakes its own.
	edit := func(s string) string {
		return strings.Replace(s, "StartLimitBurst=10\n", "StartLimitBurst=10\n# a newer flatcar-capo's drop-in\n", 1)
	}
	upgraded := testutil.BinaryWith(t, map[string]func(string) string{"pkg/node/node.go": edit})
	res = testutil.RunCmd(t, testutil.Cmd{Binary: upgraded, Args: args}).MustSucceed(t)
	again := readRecord(t, artifact)
	if again.Reused || !strings.Contains(res.Stdout+res.Stderr, "node files changed") {
		t.Fatalf("a flatcar-capo with another kubeadm drop-in reused the image baked with the old one (reused=%v):\n%s%s", again.Reused, res.Stdout, res.Stderr)
	}
	if again.Inputs.NodeFiles == rec.Inputs.NodeFiles || again.InputsKey == rec.InputsKey {
		t.Errorf("inputs nodeFiles %s and key %.12s are the old build's", again.Inputs.NodeFiles, again.InputsKey)
	}
	raw := filepath.Join(t.TempDir(), "upgraded.raw")
	testutil.Run(t, "convert", artifact, raw).MustSucceed(t)
	dropIn := filepath.Join(t.TempDir(), "dropin")
	testutil.MustRun(t, "debugfs", "-R", "dump "+node.KubeadmDropIn+" "+dropIn, rootfstest.ExtractRoot(t, raw))
	if b, _ := os.ReadFile(dropIn); string(b) != edit(node.KubeadmDropInContent) || string(b) == node.KubeadmDropInContent {
		t.Errorf("the rebuilt image's kubeadm drop-in is not the newer flatcar-capo's:\n%s", b)
	}

	t.Run("URL: reuse is keyed on the served content", func(t *testing.T) {
		served := t.TempDir()
		copyFile(t, prebuilt, filepath.Join(served, sysextFile))
		srv := httptest.NewServer(http.FileServer(http.Dir(served)))
		defer srv.Close()
		out := filepath.Join(dir, "url")
		args := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
			"--sysext", srv.URL + "/" + sysextFile, "--output-dir", out,
			"--kubernetes-mirror", "http://127.0.0.1:9/release", "--github-mirror", "http://127.0.0.1:9"}
		artifact := filepath.Join(out, "flatcar-stable-4459.2.0-kube-v1.33.4-sysext.qcow2")
		tmp := t.TempDir() // the downloads' private directory goes here and must be gone after each run
		run := func() { testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"TMPDIR=" + tmp}}).MustSucceed(t) }
		run()
		if rec := readRecord(t, artifact); len(rec.Inputs.Sysext) != 1 || !strings.HasPrefix(rec.Inputs.Sysext[0], newSum+":") {
			t.Errorf("inputs.sysext = %v, want the served content's sha512 %.12s…", rec.Inputs.Sysext, newSum)
		}
		run()
		if !readRecord(t, artifact).Reused {
			t.Fatal("the same served content did not reuse the artifact")
		}
		f, err := os.OpenFile(filepath.Join(served, sysextFile), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(make([]byte, 4096))
		f.Close()
		run()
		if readRecord(t, artifact).Reused {
			t.Fatal("new content at the same URL reused the stale image")
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
			t.Errorf("the --sysext downloads were left behind: %v", left)
		}
	})
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
