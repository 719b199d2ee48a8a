package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// skipCall is a direct skip: t.Skip, t.Skipf, b.SkipNow, ... on any receiver.
var skipCall = regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)

// Every skip in the module goes through require.go, so strict mode (.ci/run) can turn it into a
// failure: a direct t.Skip anywhere else would let missing coverage look green on CI.
func TestEverySkipGoesThroughRequire(t *testing.T) {
	root := RepoRoot()
	var offenders []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join("internal", "testing", "testutil", "require.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if skipCall.MatchString(code) && !strings.Contains(code, "filepath.SkipDir") {
				offenders = append(offenders, fmt.Sprintf("%s:%d: %s", rel, i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offenders) > 0 {
		t.Fatalf("skip through internal/testing/testutil (RequireTool(s), RequireRoot, RequireEnv, HaveRoot, SkipLong), not directly:\n%s", strings.Join(offenders, "\n"))
	}
}
