package capo_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// gpgHome is a throw-away GnuPG home (short path: gpg-agent's socket lives there) with one
// ed25519 signing key made by gpg itself, as a bakery operator makes theirs; it returns the
// armored secret key and the binary public key files.
func gpgHome(t *testing.T, uid string, args ...string) (secret, public string) {
	t.Helper()
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kill := exec.Command("gpgconf", "--kill", "gpg-agent")
		kill.Env = append(os.Environ(), "GNUPGHOME="+home)
		kill.Run()
		os.RemoveAll(home)
	})
	os.Chmod(home, 0o700)
	gpg := func(stdout string, args ...string) {
		t.Helper()
		c := exec.Command("gpg", append([]string{"--batch", "--homedir", home}, args...)...)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("gpg %v: %v\n%s", args, err, out.String())
		}
		if stdout != "" {
			os.WriteFile(stdout, out.Bytes(), 0o600)
		}
	}
	gpg("", append(append([]string{}, args...), "--quick-gen-key", uid, "ed25519", "sign", "1d")...)
	dir := t.TempDir()
	secret, public = filepath.Join(dir, "bakery.key"), filepath.Join(dir, "bakery.pub")
	gpg(secret, append(append([]string{}, args...), "--armor", "--export-secret-keys", uid)...)
	gpg(public, "--export", uid)
	return secret, public
}

// sysupdateGPG runs gpg exactly as systemd-sysupdate does (systemd's src/import/pull-common.c:
// a fresh --homedir, the keyring given with --keyring=, the signature file and "-", SHA256SUMS
// on stdin, stdout to /dev/null) and returns its error and stderr.
func sysupdateGPG(t *testing.T, keyring, sig string, sums []byte) (error, string) {
	t.Helper()
	home, err := os.MkdirTemp("", "gpgv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	c := exec.Command("gpg", "--no-options", "--no-default-keyring", "--no-auto-key-locate", "--no-auto-check-trustdb",
		"--batch", "--trust-model=always", "--homedir="+home, "--keyring="+keyring, "--verify", sig, "-")
	var stderr bytes.Buffer
	c.Stdin, c.Stderr = bytes.NewReader(sums), &stderr
	err = c.Run()
	return err, stderr.String()
}

// sysext publish --sign-key writes SHA256SUMS.gpg and Verify=true transfers in the bakery's
// layout; manifests --sysupdate-key installs the public key where systemd-sysupdate reads it;
// gpg, invoked as systemd-sysupdate invokes it with that very keyring, accepts the served
// SHA256SUMS and refuses an altered one or another signer's. (Debian 12 ships no
// systemd-sysupdate, so its own gpg invocation is the proof here.)
func TestSysextPublishSigned(t *testing.T) {
	testutil.RequireTools(t, "gpg", "gpgconf")
	secret, public := gpgHome(t, "Bakery <bakery@example.org>", "--passphrase", "")
	_, otherPublic := gpgHome(t, "Mallory <mallory@example.org>", "--passphrase", "")

	dir := t.TempDir()
	ext := filepath.Join(dir, "ext")
	os.Mkdir(ext, 0o755)
	raw := filepath.Join(ext, "kubernetes-"+kubetest.Version+"-x86-64.raw")
	os.WriteFile(raw, []byte("a sysext stand-in: publish hashes and signs, it does not mount"), 0o644)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	base := srv.URL + "/ext"

	out := testutil.Run(t, "sysext", "publish", ext, "--url", base, "--sign-key", secret).MustSucceed(t)
	if !strings.Contains(out.Stdout, "signed by") || !strings.Contains(out.Stdout, "Verify=true") {
		t.Errorf("publish does not say it signed: %s", out.Stdout)
	}
	conf := get(t, base+"/kubernetes/kubernetes-v1.33.conf")
	if !strings.HasPrefix(conf, "[Transfer]\nVerify=true\n") {
		t.Errorf("signed bakery's transfer does not say Verify=true:\n%s", conf)
	}
	if flat := get(t, base+"/kubernetes-1.33.conf"); flat != conf {
		t.Errorf("flat transfer differs:\n%s", flat)
	}

	// The keyring the node gets, from the Ignition manifests renders.
	cfg := workerIgnition(t, testutil.Run(t, "manifests", "--flavor", "sysext-baked", "--kubernetes-version", kubetest.Version,
		"--sysupdate-url", base, "--sysupdate-key", public).MustSucceed(t).Stdout)
	var keyring []byte
	var transfer string
	for _, f := range cfg.Storage.Files {
		switch f.Path {
		case "/etc/systemd/import-pubring.gpg":
			b64, ok := strings.CutPrefix(f.Contents.Source, "data:;base64,")
			if !ok {
				t.Fatalf("import-pubring.gpg source: %.60s", f.Contents.Source)
			}
			var err error
			if keyring, err = base64.StdEncoding.DecodeString(b64); err != nil {
				t.Fatal(err)
			}
		case "/etc/sysupdate.kubernetes.d/kubernetes-v1.33.conf":
			transfer = dataURL(t, f.Contents.Source)
		}
	}
	if keyring == nil || transfer != conf {
		t.Fatalf("node gets keyring %d bytes, transfer %q (published %q)", len(keyring), transfer, conf)
	}
	nodeKeyring := filepath.Join(t.TempDir(), "import-pubring.gpg")
	os.WriteFile(nodeKeyring, keyring, 0o644)

	// What systemd-sysupdate downloads, verified the way it verifies.
	sums := []byte(get(t, base+"/SHA256SUMS"))
	sig := filepath.Join(t.TempDir(), "SHA256SUMS.gpg")
	os.WriteFile(sig, []byte(get(t, base+"/SHA256SUMS.gpg")), 0o644)
	if err, stderr := sysupdateGPG(t, nodeKeyring, sig, sums); err != nil || !strings.Contains(stderr, "Good signature from \"Bakery") {
		t.Fatalf("gpg as systemd-sysupdate runs it refuses the published signature: %v\n%s", err, stderr)
	}
	forged := append(append([]byte{}, sums...), []byte(strings.Repeat("0", 64)+"  kubernetes-v1.33.99-x86-64.raw\n")...)
	if err, stderr := sysupdateGPG(t, nodeKeyring, sig, forged); err == nil {
		t.Errorf("gpg accepts a SHA256SUMS with an added line:\n%s", stderr)
	}
	if err, stderr := sysupdateGPG(t, otherPublic, sig, sums); err == nil {
		t.Errorf("gpg accepts the signature with another key's keyring:\n%s", stderr)
	}

	// Republished unsigned: no stale signature, Verify=false.
	testutil.Run(t, "sysext", "publish", ext, "--url", base).MustSucceed(t)
	if _, err := os.Stat(filepath.Join(ext, "SHA256SUMS.gpg")); !os.IsNotExist(err) {
		t.Errorf("unsigned republish left SHA256SUMS.gpg: %v", err)
	}
	if conf := get(t, base+"/kubernetes/kubernetes-v1.33.conf"); !strings.HasPrefix(conf, "[Transfer]\nVerify=false\n") {
		t.Errorf("unsigned transfer:\n%s", conf)
	}
}

// Keys that cannot sign for a bakery, or must not go onto nodes, are refused before anything
// is written, naming the fix.
func TestSysextPublishBadKeys(t *testing.T) {
	testutil.RequireTools(t, "gpg", "gpgconf")
	secret, public := gpgHome(t, "Bakery <bakery@example.org>", "--passphrase", "")
	protected, _ := gpgHome(t, "Locked <locked@example.org>", "--passphrase", "s3cret", "--pinentry-mode", "loopback")
	ext := t.TempDir()
	os.WriteFile(filepath.Join(ext, "kubernetes-"+kubetest.Version+"-x86-64.raw"), []byte("x"), 0o644)
	url := "http://127.0.0.1:9/ext"

	testutil.Run(t, "sysext", "publish", ext, "--url", url, "--sign-key", public).MustFail(t, 2, "is a public key", "--export-secret-keys")
	testutil.Run(t, "sysext", "publish", ext, "--url", url, "--sign-key", protected).MustFail(t, 2, "passphrase-protected")
	testutil.Run(t, "sysext", "publish", ext, "--url", url, "--sign-key", filepath.Join(ext, "kubernetes-"+kubetest.Version+"-x86-64.raw")).MustFail(t, 2, "not an OpenPGP key")
	pem := filepath.Join(t.TempDir(), "cosign.key")
	os.WriteFile(pem, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"), 0o600)
	testutil.Run(t, "sysext", "publish", ext, "--url", url, "--sign-key", pem).MustFail(t, 2, "PEM key", "OpenPGP")
	assertUnpublished(t, ext)
	testutil.Run(t, "manifests", "--flavor", "sysext-baked", "--kubernetes-version", kubetest.Version,
		"--sysupdate-url", url, "--sysupdate-key", secret).MustFail(t, 2, "private key", "gpg --export")
	testutil.Run(t, "manifests", "--flavor", "sysext-baked", "--kubernetes-version", kubetest.Version,
		"--sysupdate-key", public).MustFail(t, 2, "--sysupdate-url")
}

// File names and URLs that would add a line to SHA256SUMS or a key to a transfer are refused
// (exit 2) before anything is written.
func TestSysextPublishRefusesInjection(t *testing.T) {
	ext := t.TempDir()
	good := "kubernetes-" + kubetest.Version + "-x86-64.raw"
	os.WriteFile(filepath.Join(ext, good), []byte("x"), 0o644)
	for _, u := range []string{"http://10.0.0.5/ext\nVerify=false", "http://10.0.0.5/ext\rx", "ftp://10.0.0.5/ext", "10.0.0.5/ext",
		"http://user:pw@10.0.0.5/ext", "http://10.0.0.5/ext?x=1", "http://10.0.0.5/%61", "http:///ext"} {
		r := testutil.Run(t, "sysext", "publish", ext, "--url", u).MustFail(t, 2, "--url")
		if strings.Contains(r.Combined(), "pw@") {
			t.Errorf("the password is printed: %s", r.Combined())
		}
	}
	assertUnpublished(t, ext)
	testutil.Run(t, "manifests", "--flavor", "sysext-baked", "--kubernetes-version", kubetest.Version,
		"--sysupdate-url", "http://10.0.0.5/ext\nVerify=false").MustFail(t, 2, "--sysupdate-url", "control character")
	testutil.Run(t, "manifests", "--flavor", "sysext", "--kubernetes-version", kubetest.Version, "--insecure-no-hash",
		"--sysext-url", "http://10.0.0.5/ext\n        verification: {}").MustFail(t, 2, "--sysext-url", "control character")

	for _, name := range []string{"evil\n0000  kubernetes-v1.33.9-x86-64.raw", "with space.raw", `back\slash.raw`, "100%.raw"} {
		bad := t.TempDir()
		os.WriteFile(filepath.Join(bad, good), []byte("x"), 0o644)
		if err := os.WriteFile(filepath.Join(bad, name), []byte("y"), 0o644); err != nil {
			t.Fatal(err)
		}
		testutil.Run(t, "sysext", "publish", bad, "--url", "http://10.0.0.5/ext").MustFail(t, 2, "cannot be published", "rename it")
		assertUnpublished(t, bad)
	}
}

func assertUnpublished(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"SHA256SUMS", "SHA256SUMS.gpg", "noop.conf", "kubernetes"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("a refused publish wrote %s", f)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.sha512"))
	if len(matches) > 0 {
		t.Errorf("a refused publish wrote %v", matches)
	}
}
