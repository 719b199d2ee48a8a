//go:build image

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// releaseVersion is the stand-in release server's current stable release.
const releaseVersion = "4459.2.0"

// standIns are what the containers' builds download from, set as a user sets mirrors: the
// FLATCAR_CAPO_* variables of their flags. The release is a Flatcar-layout disk published as
// Flatcar publishes it (qcow2 .img, DIGESTS.asc signed by a fresh key the keyring trusts).
type standIns struct {
	release *fetchtest.Server
	keyring string // on the host, mounted at /in/keyring.asc
	mirror  *kubetest.Mirror
}

func newStandIns(t *testing.T, dir string, mirror *kubetest.Mirror) *standIns {
	t.Helper()
	raw := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	qcow := filepath.Join(dir, "release.qcow2")
	testutil.Run(t, "convert", raw, qcow, "--quiet").MustSucceed(t)
	content, err := os.ReadFile(qcow)
	if err != nil {
		t.Fatal(err)
	}
	s := &standIns{release: fetchtest.NewServer(t), keyring: filepath.Join(dir, "keyring.asc"), mirror: mirror}
	now := time.Now()
	key := fetchtest.NewKey(t, "image test buildbot", now)
	for _, image := range []string{"qemu", "openstack"} {
		s.release.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: releaseVersion, Image: image,
			Content: content, Signer: key.Current, Key: key, SignedAt: now.Add(-time.Hour), Current: true, WithoutBZ2: true})
	}
	if err := os.WriteFile(s.keyring, key.PublicArmored(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// env is the containers' environment that points flatcar-capo at the stand-ins.
func (s *standIns) env() map[string]string {
	return map[string]string{
		"FLATCAR_CAPO_RELEASE_SERVER":    s.release.ReleaseServer(),
		"FLATCAR_CAPO_KEYRING":           "/in/keyring.asc",
		"FLATCAR_CAPO_KUBERNETES_MIRROR": s.mirror.KubernetesMirror(),
		"FLATCAR_CAPO_GITHUB_MIRROR":     s.mirror.GitHubMirror(),
		"FLATCAR_CAPO_NO_PRELOAD_IMAGES": "true", // no registry stand-in here (pkg/images tests the preload)
	}
}

// mount is the podman -v of the keyring.
func (s *standIns) mount() string { return s.keyring + ":/in/keyring.asc:ro" }
