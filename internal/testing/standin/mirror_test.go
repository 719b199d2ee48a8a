package standin

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMirrorFromAptSources: the mmdebstrap mirror is the host's bookworm source, in both apt formats.
func TestMirrorFromAptSources(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, text, want string }{
		{"debian.sources", "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n" +
			"Types: deb deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n", "http://mirror.example/debian"},
		{"sources.list", "# comment\ndeb http://security.example/debian-security bookworm-security main\n" +
			"deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"},
		{"other.sources", "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\n", ""},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := mirrorIn(p); got != c.want {
			t.Errorf("%s: mirror %q, want %q", c.name, got, c.want)
		}
	}
}
