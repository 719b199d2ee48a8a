package glance_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// A Barbican that accepts the connection and never answers: Ctrl-C ends the upload at once
// (exit 130) instead of after Glance's 10-minute answer timeout, and nothing is made in Glance.
func TestSignedUploadInterruptedWhileBarbicanHangs(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	f.Misbehave(glancetest.Hostile{BarbicanHangs: true})
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	file := rawImage(t, dir, 56, 1<<20)
	cmd := exec.Command(testutil.Binary(t), "upload", file, "--name", "flatcar", "--cloud", "fake0", "--sign-key", key, "--sign-cert", cert)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "OS_CLIENT_CONFIG_FILE=" + os.Getenv("OS_CLIENT_CONFIG_FILE")}
	asked := make(chan struct{})
	go func() {
		for f.Count("GET /barbican/v1/secrets") == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // the request is well under way
		close(asked)
	}()
	start := time.Now()
	testutil.Interrupt(t, cmd, asked, "a request to Barbican")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the interrupted upload took %s to end", took)
	}
	if n := f.Count("POST /v2/images"); n != 0 {
		t.Errorf("%d images created while Barbican never answered", n)
	}
}

// A secret stored under our certificate's name by someone else (another certificate) is read
// and not used: the upload stores and names its own certificate, and says why.
func TestSignedUploadChecksTheCertificateFoundByName(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	certFile := signingtest.ValidCert(t, dir, "cert.pem", signer)
	_, otherSigner := signingtest.Key(t, dir, "other.pem", signingtest.P384)
	other, err := os.ReadFile(signingtest.ValidCert(t, dir, "other-cert.pem", otherSigner))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(certFile)
	blk, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.Raw)
	name := "flatcar-capo image signing certificate sha256:" + hex.EncodeToString(sum[:])
	impostor := f.PutSecret(name, "certificate", other)

	r := uploadCLI(t, rawImage(t, filepath.Join(dir), 57, 1<<20), "flatcar", glance.Reuse, "--sign-key", key, "--sign-cert", certFile)
	reportedID(t, r)
	var out []glance.Result
	json.Unmarshal([]byte(r.Stdout), &out)
	used := out[0].Properties[signing.PropCertUUID]
	if used == impostor || used == "" || !strings.Contains(r.Stderr, impostor) || !strings.Contains(r.Stderr, "another certificate") {
		t.Errorf("the image is signed under %q (the impostor is %s); stderr:\n%s", used, impostor, r.Stderr)
	}
	if ids := f.Secrets(name); len(ids) != 2 {
		t.Errorf("Barbican holds %v named %q, want the impostor and ours", ids, name)
	}
	// A second upload finds ours by name and stores nothing new.
	reportedID(t, uploadCLI(t, rawImage(t, dir, 58, 1<<20), "flatcar2", glance.Reuse, "--sign-key", key, "--sign-cert", certFile))
	if ids := f.Secrets(name); len(ids) != 2 {
		t.Errorf("after a second upload Barbican holds %v, want ours reused", ids)
	}
}

// Each Barbican request is bounded by httpx's stall timeout (60 s), not by the 10 minutes Glance
// gets to answer an upload: a Barbican that never answers fails the upload in about a minute,
// naming Barbican, with nothing made in Glance.
func TestSignedUploadGivesUpOnAHangingBarbican(t *testing.T) {
	testutil.Slow(t, "waits out the real 1-minute Barbican timeout")
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	f.Misbehave(glancetest.Hostile{BarbicanHangs: true})
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	start := time.Now()
	r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", rawImage(t, dir, 59, 1<<20), "--name", "flatcar", "--cloud", "fake0", "--sign-key", key, "--sign-cert", cert},
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + os.Getenv("OS_CLIENT_CONFIG_FILE")}, Timeout: 3 * time.Minute})
	r.MustFail(t, 1, "Barbican at", "did not answer within 1m0s", "nothing was uploaded")
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("the upload took %s to give up", took)
	}
	if n := f.Count("POST /v2/images"); n != 0 {
		t.Errorf("%d images created while Barbican never answered", n)
	}
}
