// Command testsummary turns `go test -json` into what `make test` shows: one line per package
// (as `go test` prints it), the full output of every failed test, one line per skipped test
// with its reason, and at the end the line CI reads:
//
//	N passed, N failed, N skipped
//
// Usage:
//
//	go test -json ./... 2>&1 | testsummary [-save FILE]   # show a run; exit 1 if anything failed
//	testsummary -total FILE...                            # the summary line over saved runs
//
// A package that fails without a failed test (a build error, a panic in TestMain, a timeout)
// counts as one failed test, so a red run never reads "0 failed".
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// counts are test results; subtests count like tests (each is a case that ran).
type counts struct{ passed, failed, skipped int }

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// run follows one `go test -json` stream.
type run struct {
	out      io.Writer
	show     bool                // print package lines, failures and skips
	output   map[string][]string // package/test -> output lines so far
	failedIn map[string]bool     // packages with a failed test
	counts   counts
}

func newRun(out io.Writer, show bool) *run {
	return &run{out: out, show: show, output: map[string][]string{}, failedIn: map[string]bool{}}
}

func (r *run) line(text string) {
	var e event
	if !strings.HasPrefix(text, "{") || json.Unmarshal([]byte(text), &e) != nil || e.Action == "" {
		if r.show { // not JSON: go vet or the linker talking, or a crash; show it as is
			fmt.Fprintln(r.out, text)
		}
		return
	}
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output": // compiler errors: show them as they come
		if r.show {
			fmt.Fprint(r.out, e.Output)
		}
	case "output":
		r.output[key] = append(r.output[key], e.Output)
	case "pass":
		if e.Test != "" {
			r.counts.passed++
		} else if r.show {
			fmt.Fprintf(r.out, "ok   %s %.1fs\n", e.Package, e.Elapsed)
		}
		delete(r.output, key)
	case "skip":
		if e.Test != "" {
			r.counts.skipped++
			if r.show {
				fmt.Fprintf(r.out, "SKIP %s %s: %s\n", e.Package, e.Test, skipReason(r.output[key]))
			}
		} else if r.show {
			fmt.Fprintf(r.out, "?    %s [no test files]\n", e.Package)
		}
		delete(r.output, key)
	case "fail":
		if e.Test != "" {
			r.counts.failed++
			r.failedIn[e.Package] = true
			if r.show {
				fmt.Fprintf(r.out, "--- FAIL %s %s (%.1fs)\n%s", e.Package, e.Test, e.Elapsed, strings.Join(r.output[key], ""))
			}
		} else {
			if !r.failedIn[e.Package] {
				r.counts.failed++ // build error, TestMain failure, panic, timeout
			}
			if r.show {
				if !r.failedIn[e.Package] {
					fmt.Fprint(r.out, strings.Join(r.output[key], ""))
				}
				fmt.Fprintf(r.out, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
			}
		}
		delete(r.output, key)
	}
}

// skipReason is the last line a skipped test logged (testutil's "SKIP: ..." message).
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		return l
	}
	return "(no reason given)"
}

// follow reads a stream to its end; save, when not nil, gets a copy of every line.
func (r *run) follow(in io.Reader, save io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if save != nil {
			fmt.Fprintln(save, sc.Text())
		}
		r.line(sc.Text())
	}
	return sc.Err()
}

// unfinished reports tests that started but never ended (the stream was cut: go test killed).
func (r *run) unfinished() []string {
	var names []string
	for k := range r.output {
		if pkg, test, _ := strings.Cut(k, "\x00"); test != "" && !strings.Contains(test, "/") {
			names = append(names, pkg+" "+test)
		}
	}
	sort.Strings(names)
	return names
}

func main() {
	save := flag.String("save", "", "also write the raw JSON stream to this file")
	total := flag.Bool("total", false, "print the summary line of the saved JSON files given as arguments")
	flag.Parse()
	if *total {
		r := newRun(io.Discard, false)
		for _, name := range flag.Args() {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "testsummary:", err)
				os.Exit(2)
			}
			err = r.follow(f, nil)
			f.Close()
			if err != nil {
				fmt.Fprintln(os.Stderr, "testsummary:", name+":", err)
				os.Exit(2)
			}
		}
		fmt.Println(r.counts)
		if r.counts.failed > 0 {
			os.Exit(1)
		}
		return
	}
	var saveTo io.Writer
	if *save != "" {
		f, err := os.Create(*save)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		saveTo = f
	}
	r := newRun(os.Stdout, true)
	if err := r.follow(os.Stdin, saveTo); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if u := r.unfinished(); len(u) > 0 {
		fmt.Printf("did not finish (go test was killed or timed out): %s\n", strings.Join(u, ", "))
		os.Exit(1)
	}
	if r.counts.failed > 0 {
		os.Exit(1)
	}
}
