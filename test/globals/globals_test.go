// Package globals holds the test that keeps process-global state out of flatcar-capo's product
// code: no package under pkg/ or internal/ sets or clears environment variables or swaps a library's global
// random source (os.Setenv, uuid.SetRand, ...). Two builds in one process (tests, `plan --build`
// if it ever runs in-process) would race on them, and no signature shows it; values such as the
// build's epoch are resolved once and passed instead. Only main (cmd/) and tests may.
package globals

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are the calls that change process-global state, by import path.
var forbidden = map[string][]string{
	"os":                     {"Setenv", "Unsetenv", "Clearenv"},
	"syscall":                {"Setenv", "Unsetenv", "Clearenv"},
	"github.com/google/uuid": {"SetRand", "EnableRandPool", "DisableRandPool", "SetNodeID", "SetNodeInterface", "SetClockSequence"},
	"math/rand":              {"Seed"},
}

// globalUses lists every use (call or reference) of a forbidden function in one Go file.
func globalUses(fset *token.FileSet, f *ast.File) []string {
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := forbidden[path]; !ok {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
	}
	var uses []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Obj != nil { // x.Obj != nil: a local variable, not the package
			return true
		}
		path, ok := names[x.Name]
		if !ok {
			return true
		}
		for _, fn := range forbidden[path] {
			if sel.Sel.Name == fn {
				uses = append(uses, fset.Position(sel.Pos()).String()+": "+path+"."+fn)
			}
		}
		return true
	})
	return uses
}

// TestNoProcessGlobalState parses every non-test Go file under pkg/ and internal/ (the test
// harness included) and fails on any use of a forbidden function; nothing is allow-listed.
func TestNoProcessGlobalState(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, root := range []string{filepath.Join("..", "..", "pkg"), filepath.Join("..", "..", "internal")} {
		if err := walkGoFiles(t, fset, root, &files); err != nil {
			t.Fatal(err)
		}
	}
	if files < 200 {
		t.Fatalf("parsed only %d files under pkg/ and internal/; is the walk rooted at the repository?", files)
	}
}

// walkGoFiles reports every forbidden use in the non-test Go files under root and counts them.
func walkGoFiles(t *testing.T, fset *token.FileSet, root string, files *int) error {
	t.Helper()
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		*files++
		for _, u := range globalUses(fset, f) {
			t.Errorf("%s changes process-global state: pass the value instead (see test/globals)", u)
		}
		return nil
	})
}

// The checker itself finds each forbidden use, renamed imports included, and leaves a local
// variable of the same name and the allowed functions alone.
func TestGlobalUsesFindsEach(t *testing.T) {
	src := `package x
import (
	"os"
	u "github.com/google/uuid"
	"math/rand"
)
func f() {
	os.Setenv("A", "1")
	defer os.Unsetenv("A")
	set := os.Clearenv
	_ = set
	u.SetRand(nil)
	rand.Seed(1)
	_ = os.Getenv("A")
	_ = rand.Int()
}
func g(os struct{ Setenv func() }) { os.Setenv() }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := globalUses(fset, f)
	want := []string{"os.Setenv", "os.Unsetenv", "os.Clearenv", "github.com/google/uuid.SetRand", "math/rand.Seed"}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], ": "+w) {
			t.Errorf("use %d: %s, want %s", i, got[i], w)
		}
	}
}
