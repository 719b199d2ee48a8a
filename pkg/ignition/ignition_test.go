package ignition_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/flatcar-capo/flatcar-capo/pkg/ignition"
)

func TestWriteMakesAValidConfigAndAPrivateKey(t *testing.T) {
	dir := t.TempDir()
	key, ign, err := ignition.Write(dir, ignition.DefaultUser)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(key.PrivateKeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	pem, _ := os.ReadFile(key.PrivateKeyFile)
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Fatalf("key type %s", signer.PublicKey().Type())
	}
	raw, _ := os.ReadFile(ign)
	var cfg struct {
		Ignition struct{ Version string }
		Passwd   struct {
			Users []struct {
				Name              string
				Groups            []string
				SSHAuthorizedKeys []string
			}
		}
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	u := cfg.Passwd.Users[0]
	if cfg.Ignition.Version != ignition.SpecVersion || u.Name != ignition.DefaultUser || u.Groups[0] != "sudo" {
		t.Fatalf("config %s", raw)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(u.SSHAuthorizedKeys[0]))
	if err != nil || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Fatalf("authorized key does not match the private key: %v", err)
	}
	// A second build gets a different key.
	key2, _, err := ignition.Write(t.TempDir(), ignition.DefaultUser)
	if err != nil || key2.AuthorizedKey == key.AuthorizedKey {
		t.Fatalf("keys are not per build: %v", err)
	}
}

func TestValidateRejectsBadConfigs(t *testing.T) {
	for _, raw := range []string{
		`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative/path"}]}}`,
		`{"ignition":{"version":"9.9.9"}}`,
		`{"ignition":`,
	} {
		if err := ignition.Validate([]byte(raw)); err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Fatalf("%s accepted: %v", raw, err)
		}
	}
	if _, err := ignition.Config("", "ssh-ed25519 AAAA"); err == nil {
		t.Fatal("a user without a name was accepted")
	}
}
