package cli_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// additionalConfigs returns every bootstrap config's additionalConfig (CLC) of a manifest.
func additionalConfigs(t *testing.T, manifest []byte) []string {
	t.Helper()
	var out []string
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		var find func(v any)
		find = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if s, ok := c.(string); ok && k == "additionalConfig" {
						out = append(out, s)
					}
					find(c)
				}
			case []any:
				for _, c := range x {
					find(c)
				}
			}
		}
		find(doc)
	}
	return out
}

// manifests --ca-file --https-proxy --no-proxy: each bootstrap config's Ignition (as CABPK
// translates the additionalConfig, spec 2.3) trusts the CA for its own downloads
// (ignition.security.tls.certificateAuthorities), puts it in the trust store, and gives
// containerd, kubelet and systemd-sysupdate the proxy from a 0600 file with the node-local
// NO_PROXY; bad values are exit 2 with nothing written.
func TestManifestsNodeTrust(t *testing.T) {
	_, ca := fetchtest.NewTLSServer(t)
	pem, _ := os.ReadFile(ca)
	dir := t.TempDir()
	out := filepath.Join(dir, "m.yaml")
	args := []string{"manifests", "--flavor", "sysext", "--kubernetes-version", "v1.33.4", "--insecure-no-hash",
		"--sysext-url", "https://mirror.example/ext", "--sysupdate-url", "https://mirror.example/ext", "--ca-file", ca,
		"--https-proxy", "http://proxyuser:pr0xy-pass@proxy.example:3128", "--no-proxy", "10.0.0.0/8,.cluster.local", "--output-file", out}
	r := testutil.Run(t, args...).MustSucceed(t)
	for _, w := range []string{"Ignition spec 2.3", "has no proxy setting", "the proxy URL carries a password"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "pr0xy-pass") {
		t.Error("stderr shows the proxy password")
	}
	manifest, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	clcs := additionalConfigs(t, manifest)
	if len(clcs) != 2 {
		t.Fatalf("%d additionalConfigs, want 2 (control plane and workers)", len(clcs))
	}
	for _, clc := range clcs {
		res := capo.TranspileCLC(clc)
		if res.Fatal || len(res.Issues) > 0 {
			t.Fatalf("additionalConfig does not translate: %v", res.Issues)
		}
		ign := res.Ignition
		cas := ign.Ignition.Security.TLS.CertificateAuthorities
		if len(cas) != 1 || !strings.HasPrefix(cas[0].Source, "data:;base64,") {
			t.Fatalf("certificateAuthorities: %+v", cas)
		}
		if got, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(cas[0].Source, "data:;base64,")); !bytes.Equal(got, pem) {
			t.Error("Ignition's CA is not --ca-file's")
		}
		files := map[string]int{}
		for _, f := range ign.Storage.Files {
			if f.Mode != nil {
				files[f.Path] = *f.Mode
			}
		}
		if files[capo.NodeCAFile] != 0o644 || files[capo.NodeProxyEnvFile] != 0o600 {
			t.Errorf("file modes %v: want %s 0644 and %s 0600", files, capo.NodeCAFile, capo.NodeProxyEnvFile)
		}
		if !strings.Contains(clc, `HTTPS_PROXY="http://proxyuser:pr0xy-pass@proxy.example:3128"`) ||
			!strings.Contains(clc, `NO_PROXY="localhost,127.0.0.1,169.254.169.254,10.0.0.0/8,.cluster.local"`) {
			t.Errorf("proxy environment missing:\n%s", clc)
		}
		dropIns := map[string]bool{}
		names := map[string]int{}
		for _, u := range ign.Systemd.Units {
			names[u.Name]++
			for _, d := range u.Dropins {
				if d.Name == "10-flatcar-capo-proxy.conf" && strings.Contains(d.Contents, "EnvironmentFile="+capo.NodeProxyEnvFile) {
					dropIns[u.Name] = true
				}
			}
		}
		for _, u := range []string{"containerd.service", "kubelet.service", "systemd-sysupdate.service"} {
			if !dropIns[u] || names[u] != 1 {
				t.Errorf("%s: proxy drop-in %v, listed %d times", u, dropIns[u], names[u])
			}
		}
	}
	for _, bad := range [][]string{
		{"--https-proxy", `http://pr"oxy:3128`},
		{"--http-proxy", "http://proxy.example:99999"},
		{"--https-proxy", "http://proxy.example:3128", "--no-proxy", "a b"},
		{"--no-proxy", "10.0.0.0/8"},
		{"--ca-file", "/etc/hostname"},
	} {
		o := filepath.Join(dir, "bad.yaml")
		a := append([]string{"manifests", "--flavor", "sysext", "--kubernetes-version", "v1.33.4", "--insecure-no-hash", "--output-file", o}, bad...)
		testutil.Run(t, a...).MustFail(t, 2, strings.TrimLeft(bad[len(bad)-2], "-"))
		if _, err := os.Stat(o); err == nil {
			t.Errorf("%v: wrote %s", bad, o)
		}
	}
}

// manifests --ca-file with a PEM that holds the certificate and its private key (a common
// bundle) used to copy the key into every node's user-data. Only CERTIFICATE blocks are taken:
// any other block is refused (exit 2, nothing written, the key never printed), and the text
// around the certificates (a bundle's comments) stays out of the manifest.
func TestManifestsCAFileOnlyCertificates(t *testing.T) {
	_, ca := fetchtest.NewTLSServer(t)
	certPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	keyB64 := base64.StdEncoding.EncodeToString(der)[:40]
	dir := t.TempDir()
	withKey := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(withKey, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.yaml")
	args := []string{"manifests", "--flavor", "sysext", "--kubernetes-version", "v1.33.4", "--insecure-no-hash", "--sysext-url", "https://mirror.example/ext", "--output-file", out, "--ca-file"}
	r := testutil.Run(t, append(args, withKey)...).MustFail(t, 2, "--ca-file", "PRIVATE KEY", "CERTIFICATE blocks")
	if strings.Contains(r.Stdout+r.Stderr, keyB64) {
		t.Error("the private key is printed")
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a manifest was written")
	}
	commented := filepath.Join(dir, "commented.pem")
	if err := os.WriteFile(commented, append([]byte("# Issuer: test CA\n"), certPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Run(t, append(args, commented)...).MustSucceed(t)
	manifest, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, clc := range additionalConfigs(t, manifest) {
		res := capo.TranspileCLC(clc)
		if strings.Contains(clc, "Issuer") {
			t.Errorf("the bundle's comment went into the nodes' CA:\n%s", clc)
		}
		cas := res.Ignition.Ignition.Security.TLS.CertificateAuthorities
		if len(cas) != 1 {
			t.Fatalf("certificateAuthorities: %+v (%v)\n%s", cas, res.Issues, clc)
		}
		if got, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(cas[0].Source, "data:;base64,")); !bytes.Equal(got, certPEM) {
			t.Errorf("Ignition's CA is not the certificate alone:\n%s", got)
		}
	}
}
