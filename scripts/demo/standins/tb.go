package main

import (
	"fmt"
	"os"
	"testing"
)

// tb lets the test fixtures (fetchtest, kubetest, standin.PublishRelease) run in a program:
// logs go to stderr, a fatal error ends the program after the cleanups, Cleanup runs at exit.
// The embedded interface is nil: only the methods below may be called.
type tb struct {
	testing.TB
	cleanups []func()
	tmp      []string
	failed   bool
}

func newTB() *tb { return &tb{} }

func (t *tb) Helper()                    {}
func (t *tb) Name() string               { return "standins" }
func (t *tb) Log(args ...any)            { fmt.Fprintln(os.Stderr, append([]any{"standins:"}, args...)...) }
func (t *tb) Logf(f string, args ...any) { fmt.Fprintf(os.Stderr, "standins: "+f+"\n", args...) }
func (t *tb) Error(args ...any)          { t.Log(args...); t.failed = true }
func (t *tb) Errorf(f string, a ...any)  { t.Logf(f, a...); t.failed = true }
func (t *tb) Fail()                      { t.failed = true }
func (t *tb) Failed() bool               { return t.failed }
func (t *tb) FailNow()                   { t.cleanup(); os.Exit(1) }
func (t *tb) Fatal(args ...any)          { t.Log(args...); t.FailNow() }
func (t *tb) Fatalf(f string, a ...any)  { t.Logf(f, a...); t.FailNow() }
func (t *tb) Skip(args ...any)           { t.Fatal(args...) } // a missing tool is an error here
func (t *tb) Skipf(f string, a ...any)   { t.Fatalf(f, a...) }
func (t *tb) SkipNow()                   { t.FailNow() }
func (t *tb) Skipped() bool              { return false }
func (t *tb) Setenv(k, v string)         { os.Setenv(k, v) }
func (t *tb) Cleanup(f func())           { t.cleanups = append(t.cleanups, f) }

func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "flatcar-capo-demo-")
	if err != nil {
		t.Fatal(err)
	}
	t.tmp = append(t.tmp, d)
	return d
}

// cleanup runs the cleanups in reverse order, once, and removes the temporary directories.
func (t *tb) cleanup() {
	for len(t.cleanups) > 0 {
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		f()
	}
	for _, d := range t.tmp {
		os.RemoveAll(d)
	}
	t.tmp = nil
}
