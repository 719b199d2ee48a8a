package packer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
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
	// The key pair ssh-keygen -t ed25519 -N "" writes, made in Go: the fast tier runs no tool.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := write("id_ed25519", string(pem.EncodeToMemory(block)), 0o600)
	write("id_ed25519.pub", string(ssh.MarshalAuthorizedKey(sshPub)), 0o644)
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
