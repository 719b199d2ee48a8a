package imagebuild_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

func decodeBOM(t *testing.T, b []byte) map[string]cdx.Component {
	t.Helper()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	out := map[string]cdx.Component{"": *bom.Metadata.Component}
	for _, c := range *bom.Components {
		out[c.BOMRef] = c
	}
	return out
}

// A sysext build preloading images from a real registry: its SBOM lists each image as
// pkg:oci with the digest the registry gave and the platform; `inspect --sbom-file`, reading only
// the artifact, finds the same images, the same sysext (sha512) and the artifact's sha512, and
// writes the same bytes twice; it refuses to write the SBOM over the image. Signed, `verify` finds
// every preloaded image digest and the sysext of the signed SBOM in the image, and an image the
// SBOM leaves out (signed again, consistently) fails it.
func TestSBOMPreloadedImagesBuildAndInspect(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "docker-registry")
	mirror := kubetest.New(t, kubernetes.Options{})
	reg := registrytest.Start(t)
	pushed, err := reg.PushKubeadm(context.Background(), kubetest.KubeadmImages("v1.33.4", ""))
	if err != nil {
		t.Fatal(err)
	}
	base := flatcardisk.Build(t, flatcardisk.Options{})
	dir := t.TempDir()
	keyPath, signer := signingtest.Key(t, dir, "sign.pem", signingtest.P256)
	pub := signingtest.PublicKey(t, dir, "sign.pub", signer)
	out := filepath.Join(dir, "out")
	build := func() testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig}, Args: append([]string{"build", "--method", "sysext", "--sign-key", keyPath,
			"--base-image", base, "--version", "4459.2.0", "--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out,
			"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}, mirror.Args()...)}).MustSucceed(t)
	}
	build()
	artifact := filepath.Join(out, "flatcar-stable-4459.2.0-kube-v1.33.4-sysext.qcow2")
	rec, err := record.Read(artifact)
	if err != nil || rec.SBOM == nil {
		t.Fatalf("record %+v: %v", rec, err)
	}
	built, err := os.ReadFile(filepath.Join(out, rec.SBOM.File))
	if err != nil {
		t.Fatal(err)
	}

	// A CI rerun reuses the artifact: its record keeps the preloaded images, its SBOM stays as it
	// was, and what it signs again verifies (issue 44: it used to rewrite both without the images).
	if r := build(); !strings.Contains(r.Stderr+r.Stdout, "reusing ") {
		t.Fatalf("the rerun did not reuse the artifact:\n%s", r.Stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(out, rec.SBOM.File)); !bytes.Equal(again, built) {
		t.Errorf("the rerun rewrote the SBOM:\n%s", again)
	}
	if rerun, err := record.Read(artifact); err != nil || !rerun.Reused || len(rerun.Images) != len(rec.Images) || len(rec.Images) != 7 ||
		rerun.SBOM == nil || *rerun.SBOM != *rec.SBOM {
		t.Errorf("the rerun's record: %+v, %v (first build's: %d images, SBOM %+v)", rerun, err, len(rec.Images), rec.SBOM)
	}
	fromBuild := decodeBOM(t, built)

	sbomFile := filepath.Join(dir, "inspected.cdx.json")
	testutil.Run(t, "inspect", artifact, "--sbom-file", sbomFile, "-o", "json").MustSucceed(t)
	inspected, _ := os.ReadFile(sbomFile)
	testutil.Run(t, "inspect", artifact, "--sbom-file", sbomFile).MustSucceed(t)
	if again, _ := os.ReadFile(sbomFile); !bytes.Equal(again, inspected) {
		t.Error("inspect wrote different SBOMs of one image")
	}
	fromInspect := decodeBOM(t, inspected)

	if len(pushed.Digest) != 7 {
		t.Fatalf("pushed %d images", len(pushed.Digest))
	}
	for ref, digest := range pushed.Digest {
		key := "image:" + ref + "@" + digest
		for what, bom := range map[string]map[string]cdx.Component{"build": fromBuild, "inspect": fromInspect} {
			c, ok := bom[key]
			repo, _, _ := strings.Cut(ref, ":")
			if repo == ref || strings.Count(ref, ":") > 1 {
				repo = ref[:strings.LastIndex(ref, ":")]
			}
			name := repo[strings.LastIndex(repo, "/")+1:]
			if !ok || c.Type != cdx.ComponentTypeContainer ||
				!strings.HasPrefix(c.PackageURL, "pkg:oci/"+name+"@"+strings.Replace(digest, ":", "%3A", 1)+"?arch=amd64&repository_url="+repo+"&tag=") {
				t.Errorf("%s SBOM: image %s: %+v", what, key, c)
			}
		}
	}
	sx := "sysext:kubernetes-v1.33.4-x86-64.raw"
	if fromBuild[sx].Hashes == nil || fromInspect[sx].Hashes == nil || (*fromBuild[sx].Hashes)[0] != (*fromInspect[sx].Hashes)[0] {
		t.Errorf("the sysext's sha512: build %+v, inspect %+v", fromBuild[sx].Hashes, fromInspect[sx].Hashes)
	}
	if got := (*fromInspect[""].Hashes)[0].Value; got != rec.Artifacts[0].SHA512 {
		t.Errorf("inspect's subject sha512 %s, the record's %s", got, rec.Artifacts[0].SHA512)
	}

	v := testutil.Run(t, "verify", artifact, "--key", pub).MustSucceed(t)
	if !strings.Contains(v.Stdout, "contents: the image holds what the SBOM lists (8 components checked)") {
		t.Errorf("verify did not find the 7 images and the sysext:\n%s", v.Stdout)
	}
	inv, err := sbom.Read(built)
	if err != nil {
		t.Fatal(err)
	}
	dropped := inv.Images[0]
	inv.Images = inv.Images[1:]
	resigned, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	signingtest.ResignSBOM(t, artifact, keyPath, resigned, true)
	testutil.Run(t, "verify", artifact, "--key", pub).MustFail(t, 1,
		"image "+dropped.Ref+" "+dropped.Platform+": the SBOM says none, the image holds "+dropped.Digest)

	before := testutil.SHA256File(t, artifact)
	testutil.Run(t, "inspect", artifact, "--sbom-file", artifact).MustFail(t, 2, "is the image itself")
	if testutil.SHA256File(t, artifact) != before {
		t.Fatal("inspect --sbom-file IMAGE modified the image")
	}
}
