package imagebuild_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// `build --method sysext` writes <artifact>.cdx.json, a CycloneDX SBOM named in the record with
// its sha256, listing the Flatcar base (version, channel, sha512), each Kubernetes download
// (version, sha256, URL) as the mirror served it, the sysext as baked (sha512 of the file) and
// flatcar-capo itself; the same inputs in another output directory give the same bytes.
func TestBuildSBOM(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	dir := t.TempDir()
	// A signed release on a stand-in release server: the record then has the verified sha512.
	base := filepath.Join(dir, "flatcar_production_openstack_image.img")
	testutil.Run(t, "convert", "--to", "qcow2", flatcardisk.Build(t, flatcardisk.Options{}), base).MustSucceed(t)
	content, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	srv := fetchtest.NewServer(t)
	key := fetchtest.NewKey(t, "Test Buildbot", time.Now())
	keyring := filepath.Join(dir, "keyring.asc")
	os.WriteFile(keyring, key.PublicArmored(t), 0o644)
	srv.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: "4459.2.0", Image: "openstack",
		Content: content, Signer: key.Current, Key: key, SignedAt: time.Now().Add(-time.Hour), Current: true, WithoutBZ2: true})
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	run := func(out, cache string) (*record.Record, []byte) {
		t.Helper()
		testutil.Run(t, append([]string{"build", "--method", "sysext", "--no-preload-images", "--release-server", srv.ReleaseServer(), "--keyring", keyring,
			"--cache-dir", cache, "--output-dir", out}, mirror.Args()...)...).MustSucceed(t)
		artifact := filepath.Join(out, name+".qcow2")
		rec, err := record.Read(artifact)
		if err != nil {
			t.Fatal(err)
		}
		if rec.SBOM == nil || rec.SBOM.File != name+".qcow2.cdx.json" {
			t.Fatalf("the record does not name the SBOM: %+v", rec.SBOM)
		}
		b, err := os.ReadFile(filepath.Join(out, rec.SBOM.File))
		if err != nil {
			t.Fatal(err)
		}
		if got := testutil.SHA256File(t, filepath.Join(out, rec.SBOM.File)); got != rec.SBOM.SHA256 {
			t.Errorf("record says the SBOM's sha256 is %s, the file's is %s", rec.SBOM.SHA256, got)
		}
		return rec, b
	}
	// Two runners: other caches, other output directories (issue 44: the cache's path was in
	// the SBOM and the record). Same artifact and SBOM bytes; the records differ only in when
	// and how long they ran; no build-host path, host name or pid is in any of them.
	cacheA, cacheB := filepath.Join(dir, "runner-a", "cache"), filepath.Join(dir, "runner-b", "other-cache")
	rec, b := run(filepath.Join(dir, "a"), cacheA)
	_, again := run(filepath.Join(dir, "b"), cacheB)
	if !bytes.Equal(b, again) {
		t.Errorf("the same inputs gave different SBOMs:\n%s\n---\n%s", b, again)
	}
	if x, y := testutil.SHA256File(t, filepath.Join(dir, "a", name+".qcow2")), testutil.SHA256File(t, filepath.Join(dir, "b", name+".qcow2")); x != y {
		t.Errorf("the same inputs gave different artifacts (sha256 %s, %s)", x, y)
	}
	recA, _ := os.ReadFile(filepath.Join(dir, "a", name+".qcow2.build.json"))
	recB, _ := os.ReadFile(filepath.Join(dir, "b", name+".qcow2.build.json"))
	if x, y := withoutTimes(t, recA), withoutTimes(t, recB); x != y {
		t.Errorf("the records differ in more than their times:\n%s\n---\n%s", x, y)
	}
	host, _ := os.Hostname()
	for what, data := range map[string][]byte{"record": recA, "SBOM": b} {
		for _, leak := range []string{dir, cacheA, os.TempDir() + "/", `"` + host + `"`, host + ":"} {
			if strings.Contains(string(data), leak) {
				t.Errorf("the %s holds the build host's %q:\n%s", what, leak, data)
			}
		}
	}

	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != cdx.SpecVersion1_6 || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") {
		t.Errorf("not a CycloneDX 1.6 BOM: %s %v %s", bom.BOMFormat, bom.SpecVersion, bom.SerialNumber)
	}
	subject := bom.Metadata.Component
	if subject == nil || subject.Name != name+".qcow2" || (*subject.Hashes)[0].Value != testutil.SHA512File(t, filepath.Join(dir, "a", name+".qcow2")) {
		t.Errorf("metadata.component is not the artifact with its sha512: %+v", subject)
	}
	tool := (*bom.Metadata.Tools.Components)[0]
	if tool.Name != "flatcar-capo" || tool.Version == "" || tool.Version != rec.Tools.FlatcarCapo {
		t.Errorf("flatcar-capo itself: %+v (record %q)", tool, rec.Tools.FlatcarCapo)
	}
	byRef := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		byRef[c.BOMRef] = c
	}
	fl := byRef["flatcar"]
	if fl.Type != cdx.ComponentTypeOS || fl.Version != "4459.2.0" || fl.Hashes == nil || (*fl.Hashes)[0].Value != testutil.SHA512File(t, base) ||
		fl.ExternalReferences == nil || !strings.HasPrefix((*fl.ExternalReferences)[0].URL, srv.ReleaseServer()[:len("http://127.0.0.1:")]) {
		t.Errorf("flatcar component: %+v, want 4459.2.0 with the base image's sha512", fl)
	}
	wantFiles := map[string]string{"kubeadm": "v1.33.4", "kubelet": "v1.33.4", "kubectl": "v1.33.4", "crictl": rec.Inputs.Crictl, "cni-plugins": rec.Inputs.CNI}
	for n, v := range wantFiles {
		c, ok := byRef["file:"+n]
		if !ok || c.Version != v || v == "" || c.Hashes == nil || c.ExternalReferences == nil {
			t.Errorf("%s: %+v, want version %q with sha256 and URL", n, c, v)
			continue
		}
		url := (*c.ExternalReferences)[0].URL
		if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(c.PackageURL, "download_url=http") {
			t.Errorf("%s source URL %q purl %q", n, url, c.PackageURL)
		}
	}
	// The sha256 the SBOM gives kubeadm is the binary's: the one in the sysext's source cache.
	var kubeadmSum string
	for _, d := range rec.Downloads {
		if d.Name == "bin/kubeadm" {
			kubeadmSum = d.SHA256
		}
	}
	if got := (*byRef["file:kubeadm"].Hashes)[0]; got.Algorithm != cdx.HashAlgoSHA256 || got.Value != kubeadmSum || kubeadmSum == "" {
		t.Errorf("kubeadm hash %+v, record %s", got, kubeadmSum)
	}
	sx := byRef["sysext:"+sysextFile]
	if sx.Version != "v1.33.4" || sx.Hashes == nil || (*sx.Hashes)[0].Value != testutil.SHA512File(t, filepath.Join(dir, "a", sysextFile)) {
		t.Errorf("sysext component %+v, want the baked file's sha512", sx)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil || generic["metadata"].(map[string]any)["timestamp"] == nil {
		t.Errorf("no timestamp from the build's SOURCE_DATE_EPOCH: %v", err)
	}
}

// withoutTimes is a record's JSON without what says when and how long it ran (steps, seconds).
func withoutTimes(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "steps")
	delete(m, "seconds")
	out, _ := json.MarshalIndent(m, "", "  ")
	return string(out)
}
