// Package ignition makes the build VM's Ignition config in Go: one build user with a fresh
// per-build ed25519 key, validated with the Ignition library before use.
package ignition

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v3 "github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"golang.org/x/crypto/ssh"
)

// SpecVersion is the Ignition spec of the config: 3.3.0, what Butane's flatcar variant emits
// and every current Flatcar reads.
const SpecVersion = "3.3.0"

// DefaultUser is the build user; sysprep removes it with its keys before shutdown.
const DefaultUser = "flatcar-capo-build"

// Key is a per-build SSH key pair.
type Key struct {
	PrivateKeyFile string // OpenSSH private key, mode 0600
	AuthorizedKey  string // "ssh-ed25519 AAAA... comment"
}

// newKey generates an ed25519 key and writes its private half to dir/name (0600).
func newKey(dir, name string) (*Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "flatcar-capo build")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writing the build key: %w", err)
	}
	if err := errors.Join(pem.Encode(f, block), f.Close()); err != nil {
		os.Remove(path)
		return nil, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	line := string(ssh.MarshalAuthorizedKey(sp))
	return &Key{PrivateKeyFile: path, AuthorizedKey: line[:len(line)-1] + " flatcar-capo-build"}, nil
}

// Config is the build VM's Ignition: the user in group sudo with the key authorized.
func Config(user, authorizedKey string) ([]byte, error) {
	if user == "" || !strings.HasPrefix(authorizedKey, "ssh-") {
		return nil, fmt.Errorf("the build VM's Ignition config needs a user name and an SSH public key (got %q, %q)", user, authorizedKey)
	}
	cfg := types.Config{
		Ignition: types.Ignition{Version: SpecVersion},
		Passwd: types.Passwd{Users: []types.PasswdUser{{
			Name:              user,
			Groups:            []types.Group{"sudo"},
			SSHAuthorizedKeys: []types.SSHAuthorizedKey{types.SSHAuthorizedKey(authorizedKey)},
		}}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := Validate(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate parses raw with the Ignition library; any error or fatal report entry fails.
func Validate(raw []byte) error {
	_, rpt, err := v3.Parse(raw)
	if err != nil {
		return fmt.Errorf("the build VM's Ignition config is invalid: %v: %s", err, rpt.String())
	}
	if rpt.IsFatal() {
		return fmt.Errorf("the build VM's Ignition config is invalid: %s", rpt.String())
	}
	return nil
}

// Write makes a key in dir and writes the Ignition config for it to dir/config.ign (0600).
func Write(dir, user string) (key *Key, ignFile string, err error) {
	key, err = newKey(dir, "build_ed25519")
	if err != nil {
		return nil, "", err
	}
	raw, err := Config(user, key.AuthorizedKey)
	if err != nil {
		return nil, "", err
	}
	ignFile = filepath.Join(dir, "config.ign")
	if err := os.WriteFile(ignFile, raw, 0o600); err != nil {
		return nil, "", err
	}
	return key, ignFile, nil
}
