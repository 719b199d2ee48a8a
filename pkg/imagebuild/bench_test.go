package imagebuild_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// BenchmarkBuildStandin is scripts/bench/build.sh: one full build of the stand-in guest per
// method, printing each step's wall time and flatcar-capo's own share (everything but the VM
// step, download excluded). Run with -benchtime 1x.
func BenchmarkBuildStandin(b *testing.B) {
	fx := newFixture(b)
	methods := []string{imagebuild.MethodPacker, imagebuild.MethodSysext}
	for i := 0; i < b.N; i++ {
		for _, m := range methods {
			out := filepath.Join(fx.dir, "bench-"+m)
			extra := []string{"--method", m, "--output-dir", out, "--force"}
			if m == imagebuild.MethodPacker && fx.packer112 != "" {
				extra = append(extra, "--packer", fx.packer112)
			}
			r := fx.run(b, nil, extra...)
			if r.Code != 0 {
				b.Fatalf("build --method %s failed:\n%s", m, r.Stderr)
			}
			qcows, _ := filepath.Glob(filepath.Join(out, "*.qcow2"))
			if len(qcows) != 1 {
				b.Fatalf("no artifact in %s", out)
			}
			printTimings(m, readRecord(b, qcows[0]))
		}
	}
}

// vmSteps are the steps whose time is the VM's (or, for sysext, the bake's own work).
var vmSteps = map[string]bool{"packer": true}

func printTimings(method string, rec *record.Record) {
	var total, vm, download float64
	var lines []string
	for _, s := range rec.Steps {
		total += s.Seconds
		switch {
		case vmSteps[s.Name]:
			vm += s.Seconds
		case s.Name == "fetch" || s.Name == "kubernetes":
			download += s.Seconds
		}
		lines = append(lines, fmt.Sprintf("  %-12s %7.2f s", s.Name, s.Seconds))
	}
	own := total - vm - download
	fmt.Fprintf(os.Stdout, "--method %s (packer %s, accelerator %s)\n%s\n", method, rec.Tools.Packer, rec.Tools.Accelerator, strings.Join(lines, "\n"))
	fmt.Fprintf(os.Stdout, "  %-12s %7.2f s\n  VM step      %7.2f s\n  downloads    %7.2f s\n  flatcar-capo %7.2f s (%.1f%% of the build, downloads excluded)\n",
		"total", total, vm, download, own, 100*own/total)
}

// BenchmarkSysextBuildPreload (scripts/bench/preload-build.sh): build --method sysext of the
// Flatcar-sized image in $FLATCAR_CAPO_BENCH_IMAGE with kubeadm's seven images sized like the
// real ones (~250 MB) from a local docker-registry; the first run fills the caches, the measured
// one rebuilds (--force) with them warm, so downloads are excluded (and must be 0 bytes).
func BenchmarkSysextBuildPreload(b *testing.B) {
	img := os.Getenv("FLATCAR_CAPO_BENCH_IMAGE")
	if img == "" {
		testutil.RequireEnv(b, fmt.Errorf("FLATCAR_CAPO_BENCH_IMAGE is not set"), "a Flatcar-sized image (scripts/bench/preload-build.sh makes it)")
	}
	mirror := kubetest.New(b, kubernetes.Options{})
	reg := registrytest.Start(b)
	if _, err := reg.PushKubeadmSized(context.Background(), kubetest.KubeadmImages(kubetest.Version, "")); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	args := append([]string{"build", "--method", "sysext", "--base-image", img, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", filepath.Join(dir, "out"), "--force",
		"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}, mirror.Args()...)
	// /usr/bin/time reports the build's own peak RSS: a child's rusage taken here would include
	// this test process's memory (Linux records the mm it exec'ed from).
	run := func(extra ...string) (time.Duration, time.Duration, int64, string) {
		cmd := exec.Command("/usr/bin/time", append([]string{"-f", "TIME %U %S %M", testutil.Binary(b)}, append(args, extra...)...)...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+reg.DockerConfig)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
		var user, sys float64
		var rss int64
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "TIME ") {
				fmt.Sscanf(l, "TIME %f %f %d", &user, &sys, &rss)
			}
		}
		return time.Since(start), time.Duration((user + sys) * float64(time.Second)), rss / 1024, string(out)
	}
	run() // fills the download and image caches
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wall, cpu, rss, out := run()
		step := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "] images") || strings.Contains(l, "] bake ROOT") {
				step += "\n  " + strings.TrimSpace(l)
			}
		}
		fmt.Printf("sysext build with kubeadm's 7 images preloaded (caches warm): %.1f s wall, %.1f s CPU, peak RSS %d MiB%s\n",
			wall.Seconds(), cpu.Seconds(), rss, step)
		wall, cpu, rss, _ = run("--no-preload-images")
		fmt.Printf("same build with --no-preload-images: %.1f s wall, %.1f s CPU, peak RSS %d MiB\n", wall.Seconds(), cpu.Seconds(), rss)
	}
}
