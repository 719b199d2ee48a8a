package kubernetes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

func TestDownloadVerifiesAndCaches(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	o := m.Options
	o.CacheDir = t.TempDir()
	set, err := kubernetes.Download(context.Background(), httpx.New(httpx.Options{}), o, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Files) != 5 {
		t.Fatalf("%d files, want 5", len(set.Files))
	}
	for _, f := range set.Files {
		if f.Cached || f.SHA256 != m.SHA256(f.Name) {
			t.Fatalf("%s: cached=%v sha256=%s want fresh %s", f.Name, f.Cached, f.SHA256, m.SHA256(f.Name))
		}
	}
	payload := t.TempDir()
	if err := set.WritePayload(payload); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bin/kubeadm", "bin/kubelet", "bin/kubectl", "crictl.tar.gz", "cni-plugins.tgz", "versions.env"} {
		fi, err := os.Stat(filepath.Join(payload, name))
		if err != nil || fi.Size() == 0 {
			t.Fatalf("payload %s: %v", name, err)
		}
	}
	env, _ := os.ReadFile(filepath.Join(payload, "versions.env"))
	if !strings.Contains(string(env), "KUBERNETES_VERSION="+kubetest.Version) {
		t.Fatalf("versions.env: %s", env)
	}
	// Second run: only the .sha256 files are fetched again.
	before := len(m.Requests())
	set, err = kubernetes.Download(context.Background(), httpx.New(httpx.Options{}), o, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range set.Files {
		if !f.Cached {
			t.Fatalf("%s not served from the cache", f.Name)
		}
	}
	for _, p := range m.Requests()[before:] {
		if !strings.HasSuffix(p, ".sha256") {
			t.Fatalf("cached run downloaded %s", p)
		}
	}
}

func TestDownloadWrongSHA256(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	o := m.Options
	o.CacheDir = t.TempDir()
	m.WrongSHA256("bin/kubelet", true)
	_, err := kubernetes.Download(context.Background(), httpx.New(httpx.Options{}), o, nil)
	var ce *kubernetes.ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ChecksumError", err)
	}
	for _, want := range []string{"kubelet", kubetest.BadSHA256, m.SHA256("bin/kubelet")} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	// Nothing unverified stays in the cache.
	filepath.Walk(o.CacheDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.Contains(p, "kubelet") {
			t.Errorf("unverified %s left in the cache", p)
		}
		return nil
	})
	// A cached file with the right hash is not trusted against a wrong .sha256 either.
	m.WrongSHA256("bin/kubelet", false)
	if _, err := kubernetes.Download(context.Background(), httpx.New(httpx.Options{}), o, nil); err != nil {
		t.Fatal(err)
	}
	m.WrongSHA256("bin/kubelet", true)
	if _, err := kubernetes.Download(context.Background(), httpx.New(httpx.Options{}), o, nil); !errors.As(err, &ce) {
		t.Fatalf("cached kubelet with a wrong published hash: err = %v", err)
	}
}

func TestParseSHA256Forms(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, in := range []string{h, h + "\n", h + "  crictl-v1.33.0-linux-amd64.tar.gz\n", strings.ToUpper(h)} {
		got, err := kubernetes.ParseSHA256(in, "x.sha256")
		if err != nil || got != h {
			t.Fatalf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"", "zz", h[:10], "<html>"} {
		if _, err := kubernetes.ParseSHA256(in, "x.sha256"); err == nil {
			t.Fatalf("%q accepted", in)
		}
	}
}

func TestValidateRejectsBadVersions(t *testing.T) {
	for _, o := range []kubernetes.Options{{Kubernetes: "1.33.4"}, {Crictl: "latest"}, {Mirror: "ftp://x"}, {Arch: "s390x"}} {
		if err := o.Validate(); err == nil {
			t.Fatalf("%+v accepted", o)
		}
	}
}
