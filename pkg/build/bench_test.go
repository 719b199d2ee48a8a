package build_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/build"
)

// BenchmarkBuildStandin is scripts/bench/build.sh: one full build of the stand-in guest per
// method, printing each step's wall time and flatcar-capo's own share (everything but the VM
// step, download excluded). Run with -benchtime 1x.
func BenchmarkBuildStandin(b *testing.B) {
	fx := newFixture(b)
	methods := []string{build.MethodPacker, build.MethodSysext}
	for i := 0; i < b.N; i++ {
		for _, m := range methods {
			out := filepath.Join(fx.dir, "bench-"+m)
			extra := []string{"--method", m, "--output-dir", out, "--force"}
			if m == build.MethodPacker && fx.packer112 != "" {
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

func printTimings(method string, rec *build.Record) {
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
