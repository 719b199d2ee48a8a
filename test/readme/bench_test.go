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

// summaryHeading heads docs/bench.md's table of the current figure of each benchmark; the README's
// Performance table is a few of its rows.
const summaryHeading = "## Current figures"

// section returns the part of doc under heading (a "## " line), up to the next "## " heading, and
// doc without it.
func section(doc, heading string) (sec, rest string) {
	before, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return "", doc
	}
	sec, tail, found := strings.Cut(after, "\n## ")
	if found {
		tail = "\n## " + tail
	}
	return sec, before + tail
}

// tableRows returns the body rows of the tables in the section of doc under heading.
func tableRows(doc, heading string) []string {
	sec, _ := section(doc, heading)
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| benchmark ") {
			rows = append(rows, l)
		}
	}
	return rows
}

// unrecorded returns each figure of rows that no dated run in bench holds (a typo, or a figure
// whose run was never written down), and each row without one.
func unrecorded(rows []string, bench string) []string {
	// Bold and line breaks do not change a figure.
	bench = strings.NewReplacer("**", "", "\n", " ").Replace(bench)
	recorded := map[string]bool{}
	for _, f := range figures(bench) {
		recorded[f] = true
	}
	var bad []string
	for _, row := range rows {
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

// TestBenchFigures: docs/bench.md's "Current figures" table keeps one current figure per benchmark
// (the README's Performance table a few of them) and the rest of docs/bench.md the dated runs behind
// them. Every figure of both tables must be one a dated run records, every scripts/bench/*.sh the
// pages name must exist, and every benchmark scripts/bench/run-all.sh runs must have its row, so a
// figure cannot go stale unseen when its benchmark is renamed, removed or re-run.
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
	_, runs := section(bench, summaryHeading)
	readmeRows, benchRows := tableRows(readme, "## Performance"), tableRows(bench, summaryHeading)
	if len(readmeRows) < 3 {
		t.Errorf("only %d rows in the README's Performance table: the extraction is broken", len(readmeRows))
	}
	if len(benchRows) < 10 {
		t.Fatalf("only %d rows in docs/bench.md's %q table: the extraction is broken", len(benchRows), summaryHeading)
	}
	for _, b := range unrecorded(readmeRows, runs) {
		t.Errorf("README.md's Performance table: %s: not a figure docs/bench.md's dated runs record (add the dated run there, or fix the figure)", b)
	}
	for _, b := range unrecorded(benchRows, runs) {
		t.Errorf("docs/bench.md's %q: %s: not a figure its dated runs record (add the dated run, or fix the figure)", summaryHeading, b)
	}
	for _, doc := range []string{"README.md", "docs/bench.md", "CONTRIBUTING.md"} {
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
	table := strings.Join(benchRows, "\n")
	for _, b := range strings.Fields(list) {
		if !strings.Contains(table, "scripts/bench/"+b+".sh") {
			t.Errorf("scripts/bench/run-all.sh runs %s.sh, but docs/bench.md's %q table has no row naming it", b, summaryHeading)
		}
	}
}

// The check catches a figure that is not recorded, a wrong unit and a row without figures, and a
// summary table's own figures do not count as recorded.
func TestBenchFiguresCatchStale(t *testing.T) {
	bench := "### convert\n\n| case | ours |\n|---|---|\n| warm | **1.08 s** |\n\nRSS 41 / 188 MiB, 12.75-12.93 s\nand 3.4\nms.\n"
	good := []string{"| convert | 1.08 s, 41 MiB, 12.75 s, 3.4 ms |"}
	if bad := unrecorded(good, bench); len(bad) != 0 {
		t.Errorf("recorded figures reported: %q", bad)
	}
	for text, want := range map[string]string{
		"| convert | 1.07 s |":          "1.07 s",
		"| convert | 1.08 ms |":         "1.08 ms",
		"| convert | 12.75-12.94 s |":   "12.75-12.94 s",
		"| convert, nothing measured |": "a row with no figure",
	} {
		bad := unrecorded([]string{text}, bench)
		if len(bad) == 0 || !strings.Contains(bad[0], want) {
			t.Errorf("%s: got %q, want a report of %q", text, bad, want)
		}
	}
	doc := "# B\n\n" + summaryHeading + "\n\n| benchmark | ours |\n|---|---|\n| convert | 9.99 s |\n\n## Runs\n\n" + bench
	_, runs := section(doc, summaryHeading)
	rows := tableRows(doc, summaryHeading)
	if bad := unrecorded(rows, runs); len(rows) != 1 || len(bad) != 1 || !strings.Contains(bad[0], "9.99 s") {
		t.Errorf("a figure only the summary holds: rows %q, got %q, want 9.99 s reported", rows, bad)
	}
}
