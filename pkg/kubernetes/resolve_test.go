package kubernetes_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// Every --kubernetes-version form resolves through the mirror's marker files, and each way a
// marker can be wrong is an error naming its URL and the fix.
func TestResolveVersion(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	m.SetMarker("stable.txt", []byte("v1.36.1\n"))
	m.SetMarker("stable-1.35.txt", []byte("v1.35.2\n"))
	ctx := context.Background()
	c := httpx.New(httpx.Options{Retries: 0})
	for in, want := range map[string]string{"stable": "v1.36.1", "1.35": "v1.35.2", "v1.35": "v1.35.2", "v1.34.0": "v1.34.0", "1.33": kubetest.Version} {
		got, err := kubernetes.ResolveVersion(ctx, c, m.KubernetesMirror(), in)
		if err != nil || got != want {
			t.Errorf("%s resolved to %q, %v; want %s", in, got, err, want)
		}
	}
	before := len(m.Requests())
	kubernetes.ResolveVersion(ctx, c, m.KubernetesMirror(), "v1.34.0")
	if len(m.Requests()) != before {
		t.Error("an exact version read a marker file")
	}

	m.SetMarker("stable-1.34.txt", []byte("<html>maintenance</html>"))
	m.SetMarker("stable-1.32.txt", []byte("v1.31.9\n"))
	for _, tc := range []struct {
		mirror, in string
		want       []string
	}{
		{m.KubernetesMirror(), "1.99", []string{m.KubernetesMirror() + "/stable-1.99.txt", "404", "exact --kubernetes-version"}},
		{m.KubernetesMirror(), "1.34", []string{m.KubernetesMirror() + "/stable-1.34.txt", "not a release tag", "maintenance"}},
		{m.KubernetesMirror(), "1.32", []string{"stable-1.32.txt names v1.31.9, another minor"}},
		{"http://127.0.0.1:9/release", "stable", []string{"http://127.0.0.1:9/release/stable.txt", "cannot read", "mirror that file"}},
		{m.KubernetesMirror(), "1.33.4", []string{"with the v, e.g. v1.33.4"}},
		{m.KubernetesMirror(), "latest", []string{"want stable, a minor"}},
	} {
		_, err := kubernetes.ResolveVersion(ctx, c, tc.mirror, tc.in)
		if err == nil {
			t.Errorf("%s from %s: no error", tc.in, tc.mirror)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.in, err, w)
			}
		}
	}
	m.SetMarker("stable.txt", nil)
	if _, err := kubernetes.ResolveVersion(ctx, c, m.KubernetesMirror(), "stable"); err == nil || !strings.Contains(err.Error(), m.KubernetesMirror()+"/stable.txt does not exist") {
		t.Errorf("missing stable.txt: %v", err)
	}
}

// Resolve fills crictl v<minor>.0 and a fitting CNI unless they were given.
func TestResolveFillsToolVersions(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	m.SetMarker("stable-1.36.txt", []byte("v1.36.1\n"))
	o := kubernetes.Options{Kubernetes: "1.36", Mirror: m.KubernetesMirror()}
	if err := o.Resolve(context.Background(), httpx.New(httpx.Options{Retries: 0})); err != nil {
		t.Fatal(err)
	}
	if o.Kubernetes != "v1.36.1" || o.Crictl != "v1.36.0" || o.CNI != kubernetes.DefaultCNIVersion {
		t.Errorf("resolved %+v", o)
	}
	o = kubernetes.Options{Kubernetes: "v1.30.2", Crictl: "v1.31.1", CNI: "v1.4.0"}
	if err := o.Resolve(context.Background(), nil); err != nil || o.Crictl != "v1.31.1" || o.CNI != "v1.4.0" {
		t.Errorf("given versions not kept: %+v %v", o, err)
	}
	if kubernetes.DefaultCNIFor("v1.30.2") == kubernetes.DefaultCNIVersion {
		t.Error("an old minor gets the newest CNI plugins")
	}
}
