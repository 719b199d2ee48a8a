package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// figureRE matches a measured figure: a number or a range of two, then its unit.
var figureRE = regexp.MustCompile(`(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?\s?(ms|min|s|MiB|MB|GiB|GB|KiB|x|%)(?:\b|$|[^A-Za-z])`)

// slashRE matches "41 / 188 MiB", the ours / theirs cells of bench.md's tables.
var slashRE = regexp.MustCompile(`(\d+(?:\.\d+)?) / (\d+(?:\.\d+)?) (ms|s|MiB|MB|GiB)\b`)

// figures lists the figures of text as "N unit", with a range also as its two ends.
func figures(text string) []string {
	var out []string
	for _, m := range figureRE.FindAllStringSubmatch(text, -1) {
		if m[2] == "" {
			out = append(out, m[1]+" "+m[3])
			continue
		}
		out = append(out, m[1]+"-"+m[2]+" "+m[3], m[1]+" "+m[3], m[2]+" "+m[3])
	}
	for _, m := range slashRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1]+" "+m[3], m[2]+" "+m[3])
	}
	return out
}

// performanceTable returns the rows of the README's Performance table.
func performanceTable(readme string) []string {
	_, sec, _ := strings.Cut(readme, "\n## Performance\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| benchmark ") {
			rows = append(rows, l)
		}
	}
	return rows
}

// unrecorded returns each figure of the README's Performance table that no dated run in bench
// holds (a typo, or a figure whose run was never written down), and each table row without one.
func unrecorded(readme, bench string) []string {
	// Bold and line breaks do not change a figure.
	bench = strings.NewReplacer("**", "", "\n", " ").Replace(bench)
	recorded := map[string]bool{}
	for _, f := range figures(bench) {
		recorded[f] = true
	}
	var bad []string
	for _, row := range performanceTable(readme) {
		fs := figures(strings.ReplaceAll(row, "**", ""))
		if len(fs) == 0 {
			bad = append(bad, "a row with no figure: "+row)
		}
		for _, f := range fs {
			if !recorded[f] {
				bad = append(bad, f+" in: "+row)
			}
		}
	}
	return bad
}

var benchScriptRE = regexp.MustCompile(`scripts/bench/[a-z0-9-]+\.sh`)

// TestBenchFigures: the README's Performance table keeps one current figure per benchmark and
// docs/bench.md the dated runs behind them. Every figure of the table must be one bench.md
// records, every scripts/bench/*.sh either names must exist, and every benchmark
// scripts/bench/run-all.sh runs must have its row, so a figure cannot go stale unseen when its
// benchmark is renamed, removed or re-run.
func TestBenchFigures(t *testing.T) {
	root := testutil.RepoRoot()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, bench, runAll := read("README.md"), read("docs/bench.md"), read("scripts/bench/run-all.sh")
	rows := performanceTable(readme)
	if len(rows) < 10 {
		t.Fatalf("only %d rows in the README's Performance table: the extraction is broken", len(rows))
	}
	for _, b := range unrecorded(readme, bench) {
		t.Errorf("README.md's Performance table: %s: not a figure docs/bench.md records (add the dated run there, or fix the figure)", b)
	}
	for _, doc := range []string{"README.md", "docs/bench.md"} {
		for _, s := range slices.Compact(slices.Sorted(slices.Values(benchScriptRE.FindAllString(read(doc), -1)))) {
			if _, err := os.Stat(filepath.Join(root, s)); err != nil {
				t.Errorf("%s names %s, which does not exist", doc, s)
			}
		}
	}
	_, list, ok := strings.Cut(runAll, "for b in ")
	list, _, _ = strings.Cut(list, ";")
	if !ok || len(strings.Fields(list)) < 5 {
		t.Fatalf("cannot read run-all.sh's list of benchmarks: %q", list)
	}
	table := strings.Join(rows, "\n")
	for _, b := range strings.Fields(list) {
		if !strings.Contains(table, "scripts/bench/"+b+".sh") {
			t.Errorf("scripts/bench/run-all.sh runs %s.sh, but the README's Performance table has no row naming it", b)
		}
	}
}

// The check catches a figure that is not recorded, a wrong unit and a row without figures.
func TestBenchFiguresCatchStale(t *testing.T) {
	bench := "### convert\n\n| case | ours |\n|---|---|\n| warm | **1.08 s** |\n\nRSS 41 / 188 MiB, 12.75-12.93 s\nand 3.4\nms.\n"
	good := "\n## Performance\n\n| benchmark | flatcar-capo |\n|---|---|\n| convert | 1.08 s, 41 MiB, 12.75 s, 3.4 ms |\n"
	if bad := unrecorded(good, bench); len(bad) != 0 {
		t.Errorf("recorded figures reported: %q", bad)
	}
	for text, want := range map[string]string{
		"| convert | 1.07 s |":          "1.07 s",
		"| convert | 1.08 ms |":         "1.08 ms",
		"| convert | 12.75-12.94 s |":   "12.75-12.94 s",
		"| convert, nothing measured |": "a row with no figure",
	} {
		bad := unrecorded("\n## Performance\n\n"+text+"\n", bench)
		if len(bad) == 0 || !strings.Contains(bad[0], want) {
			t.Errorf("%s: got %q, want a report of %q", text, bad, want)
		}
	}
}
