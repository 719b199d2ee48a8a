package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// sysext create and manifests take stable and minors as build does, resolved through the mirror.
func TestKubernetesVersionFormsSysextAndManifests(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	dir := t.TempDir()
	testutil.RunCmd(t, testutil.Cmd{Dir: dir, Args: []string{"sysext", "create", "--kubernetes-version", "1.33", "--cache-dir", filepath.Join(dir, "cache"),
		"--kubernetes-mirror", m.KubernetesMirror(), "--github-mirror", m.GitHubMirror()}}).MustSucceed(t)
	if _, err := os.Stat(filepath.Join(dir, "kubernetes-"+kubetest.Version+"-x86-64.raw")); err != nil {
		t.Errorf("sysext create --kubernetes-version 1.33 did not name the file after %s: %v", kubetest.Version, err)
	}
	m.SetMarker("stable.txt", []byte("v1.36.1\n"))
	r := testutil.Run(t, "manifests", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).MustSucceed(t)
	if !strings.Contains(r.Stdout, "version: v1.36.1") {
		t.Errorf("manifests --kubernetes-version stable did not use v1.36.1")
	}
	m.SetMarker("stable.txt", []byte("garbage\n"))
	testutil.Run(t, "manifests", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).
		MustFail(t, 1, m.KubernetesMirror()+"/stable.txt", "not a release tag")
	testutil.Run(t, "manifests", "--kubernetes-version", "v1.34.1", "--kubernetes-mirror", "http://127.0.0.1:9/release").MustSucceed(t)
}
