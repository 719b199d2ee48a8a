package imagebuild_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// TestBuildSignedVerify: `build --sign-key` writes the .sig files of the image and its record
// (without --cloud too); with --cloud and --sign-cert the real Glance verifies the image's
// signature on upload (its log says so), and `flatcar-capo verify --key` accepts the files as
// built and refuses a changed record, a changed image and another key.
func TestBuildSignedVerify(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	dir := t.TempDir()
	clouds := sharedOpenStack(t)
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	keyPath, signer := signingtest.Key(t, dir, "sign.pem", signingtest.P384)
	pub := signingtest.PublicKey(t, dir, "sign.pub", signer)
	cert := signingtest.ValidCert(t, dir, "sign.crt", signer)
	_, other := signingtest.Key(t, dir, "other.pem", signingtest.P384)
	otherPub := signingtest.PublicKey(t, dir, "other.pub", other)
	out := filepath.Join(dir, "out")
	name := "flatcar-signed-" + filepath.Base(dir)
	args := append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--image-name", name, "--sign-key", keyPath}, mirror.Args()...)
	run := func(a ...string) testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{Args: a, Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}})
	}
	artifact := filepath.Join(out, name+".qcow2")
	recordPath := record.Path(artifact)

	// No cloud: only the .sig files, and a certificate flag is refused as meaningless.
	run(append(args, "--sign-cert", cert)...).MustFail(t, 2, "--sign-cert", "--cloud")
	run(args...).MustSucceed(t)
	for _, f := range []string{artifact + ".sig", recordPath + ".sig"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("build --sign-key did not write %s: %v", f, err)
		}
	}
	run("verify", artifact, "--key", pub).MustSucceed(t)

	// With a cloud: the artifact is reused, uploaded signed, and the rewritten record signed again.
	run(append(args, "--cloud", "local", "--sign-cert", cert)...).MustSucceed(t)
	rec, err := record.Read(artifact)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Glance) != 1 {
		t.Fatalf("record glance: %+v", rec.Glance)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	c, err := glance.Connect(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.Get(context.Background(), c.Image, rec.Glance[0].ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if img.Status != images.ImageStatusActive || img.Properties["img_signature_key_type"] != "ECC_SECP384R1" || img.Properties["img_signature"] == nil {
		t.Fatalf("Glance image %s: status %s, properties %v", img.ID, img.Status, img.Properties)
	}
	log, err := os.ReadFile(filepath.Join(filepath.Dir(clouds), "glance-one", "glance-api.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Successfully verified signature for image "+img.ID) {
		t.Fatalf("Glance's log has no successful signature verification of %s", img.ID)
	}
	ok := run("verify", artifact, "--key", pub, "-o", "json").MustSucceed(t)
	if !strings.Contains(ok.Stdout, `"ok": true`) || strings.Count(ok.Stdout, `"signature":`) != 3 || !strings.Contains(ok.Stdout, `.cdx.json.sig"`) {
		t.Fatalf("verify -o json:\n%s", ok.Stdout)
	}
	run("verify", artifact, "--key", cert).MustSucceed(t) // the certificate carries the same key

	run("verify", artifact, "--key", otherPub).MustFail(t, 1, "does not verify with this key")
	run("verify", artifact).MustFail(t, 2, "--key is required")

	// A changed record (the Glance ID edited) and a changed image fail, naming the file.
	orig, _ := os.ReadFile(recordPath)
	if err := os.WriteFile(recordPath, []byte(strings.Replace(string(orig), rec.Glance[0].ID, "00000000-0000-0000-0000-000000000000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	run("verify", artifact, "--key", pub).MustFail(t, 1, filepath.Base(recordPath)+": the signature does not verify")
	os.WriteFile(recordPath, orig, 0o644)
	f, err := os.OpenFile(artifact, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	run("verify", artifact, "--key", pub).MustFail(t, 1, filepath.Base(artifact)+": the signature does not verify", "not the record's")
}

// --dry-run with --sign-key names the .sig files it would write and writes none; an unusable key
// is refused before anything (exit 2).
func TestBuildSignDryRun(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	dir := t.TempDir()
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	keyPath, _ := signingtest.Key(t, dir, "sign.pem", signingtest.P256)
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--image-name", "dry", "--dry-run"}, mirror.Args()...)
	r := testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--sign-key", keyPath)}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "signatures:") || !strings.Contains(r.Stdout, "dry.qcow2.sig") || !strings.Contains(r.Stdout, "dry.qcow2.build.json.sig") {
		t.Fatalf("the plan does not name the signatures:\n%s", r.Stdout)
	}
	if sigs, _ := filepath.Glob(filepath.Join(out, "*.sig")); len(sigs) > 0 {
		t.Fatalf("a dry run wrote %v", sigs)
	}
	// A key file given as the certificate is refused, naming the flag.
	testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--sign-key", keyPath, "--cloud", "local", "--sign-cert", keyPath)}).
		MustFail(t, 2, "--sign-cert", "not a CERTIFICATE")
	notKey := filepath.Join(dir, "not-a-key")
	os.WriteFile(notKey, []byte("hello"), 0o600)
	testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--sign-key", notKey)}).MustFail(t, 2, "is not PEM")
}
