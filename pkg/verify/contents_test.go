package verify_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// TestVerifyContents: verify reads a real sysext build's image and finds what its signed SBOM
// lists; an SBOM changed and signed again with the same key (the record too, so every signature
// verifies) fails on the contents, naming the component and both values.
func TestVerifyContents(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	dir := t.TempDir()
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	keyPath, signer := signingtest.Key(t, dir, "sign.pem", signingtest.P256)
	pub := signingtest.PublicKey(t, dir, "sign.pub", signer)
	out := filepath.Join(dir, "out")
	testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base,
		"--version", "4459.2.0", "--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--image-name", "k8s", "--sign-key", keyPath},
		mirror.Args()...)}).MustSucceed(t)
	artifact := filepath.Join(out, "k8s.qcow2")
	recordPath, sbomPath := record.Path(artifact), sbom.Path(artifact)
	verify := func(a ...string) testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"verify", artifact, "--key", pub}, a...)})
	}

	// As built: the image holds the sysext the SBOM lists, with its sha512.
	rec, err := record.Read(artifact)
	if err != nil {
		t.Fatal(err)
	}
	var sx record.Artifact
	for _, a := range rec.Artifacts {
		if strings.HasSuffix(a.File, ".raw") {
			sx = a
		}
	}
	if sx.SHA512 == "" {
		t.Fatalf("the record lists no sysext: %+v", rec.Artifacts)
	}
	ok := verify().MustSucceed(t)
	if want := "image: k8s (the signed record's: Flatcar 4459.2.0, Kubernetes " + rec.KubernetesVersion + ", method sysext)"; !strings.Contains(ok.Stdout, want) {
		t.Errorf("verify does not say which image passed (%q):\n%s", want, ok.Stdout)
	}
	if !regexp.MustCompile(`contents: the image holds what the SBOM lists \([1-9][0-9]* components checked\)`).MatchString(ok.Stdout) {
		t.Fatalf("verify did not check the contents:\n%s", ok.Stdout)
	}
	js := verify("-o", "json").MustSucceed(t)
	if !strings.Contains(js.Stdout, `"contentsChecked": `) || strings.Contains(js.Stdout, `"contentsChecked": 0`) {
		t.Fatalf("verify -o json:\n%s", js.Stdout)
	}

	origSBOM, _ := os.ReadFile(sbomPath)
	origRecord, _ := os.ReadFile(recordPath)
	resign := func(changed []byte, updateRecord bool) {
		t.Helper()
		signingtest.ResignSBOM(t, artifact, keyPath, changed, updateRecord)
	}
	const fake = "0000000000000000000000000000000000000000000000000000000000000000"

	// The sysext's sha512 changed in the SBOM: every signature verifies, the contents do not.
	resign([]byte(strings.Replace(string(origSBOM), sx.SHA512, fake+fake, 1)), true)
	r := verify().MustFail(t, 1, "sysext "+sx.File+": the SBOM says sha512 "+fake+fake+", the image holds sha512 "+sx.SHA512)
	if strings.Count(r.Stdout, ": verified") != 3 {
		t.Fatalf("the signatures should all verify:\n%s", r.Stdout)
	}

	// A preloaded image the SBOM claims and the image lacks.
	inv, err := sbom.Read(origSBOM)
	if err != nil {
		t.Fatal(err)
	}
	inv.Images = append(inv.Images, sbom.Image{Ref: "registry.k8s.io/pause:3.10", Digest: "sha256:" + fake, Platform: "linux/amd64"})
	b, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	resign(b, true)
	verify().MustFail(t, 1, "image registry.k8s.io/pause:3.10 linux/amd64: the SBOM says sha256:"+fake+", the image holds none")

	// An SBOM signed again but not the record's: its sha256 is not the one the record names.
	os.WriteFile(recordPath, origRecord, 0o644)
	if key, err := signing.LoadKey(keyPath); err != nil {
		t.Fatal(err)
	} else if _, err := signing.SignFile(key, recordPath); err != nil {
		t.Fatal(err)
	}
	resign(b, false)
	r = verify().MustFail(t, 1, "SBOM "+filepath.Base(sbomPath)+": the record says sha256 "+rec.SBOM.SHA256)
	if strings.Count(r.Stdout, ": verified") != 3 {
		t.Fatalf("the signatures should all verify:\n%s", r.Stdout)
	}

	// Restored, it verifies again.
	resign(origSBOM, true)
	verify().MustSucceed(t)

	verifyCopiesAndHostileFiles(t, artifact, pub, dir)
}

// verifyCopiesAndHostileFiles (issue 44): a signed image with its signed record put under another
// image's name fails; a record, signature or SBOM that is a FIFO or a device is refused at once
// (exit 2) instead of hanging or filling memory; with a key that signed nothing here every
// signature fails and the image's contents are not read.
func verifyCopiesAndHostileFiles(t *testing.T, artifact, pub, dir string) {
	copyAs := func(to string, skip ...string) string {
		t.Helper()
		other := filepath.Join(to, "other.qcow2")
		os.MkdirAll(to, 0o755)
		for _, suffix := range []string{"", ".sig", ".build.json", ".build.json.sig", ".cdx.json", ".cdx.json.sig"} {
			if slices.Contains(skip, suffix) {
				continue
			}
			name := other + suffix
			if strings.HasPrefix(suffix, ".cdx.json") {
				name = filepath.Join(to, "k8s.qcow2"+suffix) // the record names the SBOM by its own name
			}
			b, err := os.ReadFile(artifact + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return other
	}
	run := func(a ...string) testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{Args: a, Timeout: 2 * time.Minute})
	}
	other := copyAs(filepath.Join(dir, "renamed"))
	r := run("verify", other, "--key", pub).MustFail(t, 1, "the record describes k8s.qcow2, not other.qcow2")
	if !strings.Contains(r.Stdout, "image: k8s ") {
		t.Errorf("verify does not name the record's image:\n%s", r.Stdout)
	}

	for _, c := range []struct{ suffix, want string }{
		{".build.json", "named pipe"}, {".sig", "named pipe"}, {".cdx.json", "character device"}} {
		d := filepath.Join(dir, "hostile"+strings.ReplaceAll(c.suffix, ".", "-"))
		other := copyAs(d, c.suffix)
		p := other + c.suffix
		if c.suffix == ".cdx.json" {
			if err := os.Symlink("/dev/zero", filepath.Join(d, "k8s.qcow2.cdx.json")); err != nil {
				t.Fatal(err)
			}
		} else if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		run("verify", other, "--key", pub).MustFail(t, 2, c.want)
	}

	_, otherSigner := signingtest.Key(t, dir, "other.pem", signingtest.P256)
	otherPub := signingtest.PublicKey(t, dir, "other.pub", otherSigner)
	r = run("verify", artifact, "--key", otherPub).MustFail(t, 1, "the signature does not verify")
	if !strings.Contains(r.Stdout, "the contents were not checked") || strings.Contains(r.Stdout, "components checked") {
		t.Errorf("verify read the image's contents after every signature failed:\n%s", r.Stdout)
	}
}
