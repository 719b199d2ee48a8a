package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Issue 27's hostile proxy and registry values on build: exit 2 with the rule, before anything
// is downloaded or written (the output directory is not even made), the password never shown.
func TestBuildTrustUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-proxy", `http://pr"oxy:3128`}, "quote"},
		{[]string{"--https-proxy", "http://proxy.example:99999"}, "1-65535"},
		{[]string{"--https-proxy", "http://u:hidden-pass@proxy.example:3128/path"}, "no path"},
		{[]string{"--http-proxy", "ftp://proxy.example:21"}, "--http-proxy"},
		{[]string{"--https-proxy", "http://proxy.example:3128", "--no-proxy", "a b"}, "--no-proxy"},
		{[]string{"--https-proxy", "http://proxy.example:3128", "--no-proxy", "x\ny"}, "--no-proxy"},
		{[]string{"--no-proxy", "10.0.0.0/8"}, "does nothing"},
		{[]string{"--registry-mirror-only"}, "needs a --registry-mirror"},
		{[]string{"--registry-mirror", "..=https://m.example"}, "empty label"},
		{[]string{"--registry-mirror", "registry.k8s.io=https://m.example:99999"}, "1-65535"},
		{[]string{"--registry-mirror", "reg\nistry=https://m.example"}, "control character"},
	} {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		r := testutil.Run(t, append([]string{"build", "--method", "sysext", "--release-server", "http://127.0.0.1:9/{channel}", "--output-dir", out}, tc.args...)...)
		r.MustFail(t, 2, tc.want)
		if strings.Contains(r.Stdout+r.Stderr, "hidden-pass") {
			t.Errorf("%q: the output shows the proxy password:\n%s", tc.args, r.Stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: %s was created", tc.args, out)
		}
	}
}
