package packer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// fixture is a Config whose inputs exist (a small sparse base disk, a real SSH key, an
// Ignition file, a payload with every file) but whose payload binaries are placeholders.
func fixture(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base.img", "", 0o644)
	if err := os.Truncate(base, 64<<20); err != nil {
		t.Fatal(err)
	}
	for _, f := range PayloadFiles {
		write(filepath.Join("payload", f), "placeholder "+f+"\n", 0o755)
	}
	key := filepath.Join(dir, "id_ed25519")
	testutil.MustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key)
	return Config{
		BaseImage:         base,
		OutputDir:         filepath.Join(dir, "out"),
		OutputName:        "flatcar.img",
		WorkDir:           filepath.Join(dir, "work"),
		SSHUser:           "builder",
		SSHPrivateKeyFile: key,
		IgnitionFile:      write("config.ign", `{"ignition":{"version":"3.3.0"}}`, 0o600),
		Payload:           filepath.Join(dir, "payload"),
		Vars:              map[string]string{"KUBERNETES_VERSION": "v1.33.4", "KEEP_UPDATES": "0"},
		Accelerator:       "tcg",
	}
}
