package standin

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestUserName is the user TestUser's Ignition config creates (in group sudo: passwordless sudo).
const TestUserName = "capo-test"

// TestUser returns an Ignition 3.3 config that creates TestUserName with a fresh ed25519 key,
// and the path of that key's private half (OpenSSH format, 0600) in t.TempDir().
func TestUser(t testing.TB) (ignition []byte, privateKey string) {
	t.Helper()
	ign, key, err := NewUser(t.TempDir(), TestUserName)
	if err != nil {
		t.Fatalf("standin: %v", err)
	}
	return ign, key
}

// TestUserKey is TestUser's key for a login a test adds itself (a KubeadmConfigSpec user): the
// private key's path and the public key in authorized_keys form.
func TestUserKey(t testing.TB) (privateKey, authorized string) {
	t.Helper()
	_, key := TestUser(t)
	b, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatalf("standin: %v", err)
	}
	return key, strings.TrimSpace(string(b))
}

// NewUser writes a fresh ed25519 key pair into dir and returns an Ignition 3.3 config creating
// user name (groups sudo) with that key, and the private key's path.
func NewUser(dir, name string) (ignition []byte, privateKey string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "flatcar-capo standin")
	if err != nil {
		return nil, "", err
	}
	privateKey = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(privateKey, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, "", err
	}
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if err := os.WriteFile(privateKey+".pub", []byte(authorized+"\n"), 0o644); err != nil {
		return nil, "", err
	}
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.3.0"},
		"passwd": map[string]any{"users": []any{map[string]any{
			"name": name, "groups": []string{"sudo"}, "sshAuthorizedKeys": []string{authorized},
		}}},
	}
	ignition, err = json.Marshal(cfg)
	return ignition, privateKey, err
}
