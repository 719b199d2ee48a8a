package capo

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// A kubeadm init that failed after writing its static pods (its control plane not healthy in
// 1200 s, seen in a node proof under load) failed every retry in preflight; one that failed in
// its CoreDNS addon after CAPI had used its API (the CAPO loop) must not be reset: every
// template's kubeadm.service that restarts on failure must resume an init whose etcd started
// and undo any other failed kubeadm first, in the user-data CABPK's renderer makes of it
// (flavor x CAPI API, and the ClusterClass).
func TestKubeadmRetryResumesOrResets(t *testing.T) {
	type combo struct {
		flavor, api  string
		clusterClass bool
	}
	var combos []combo
	for _, flavor := range FlavorNames() {
		for _, api := range capiAPIs {
			combos = append(combos, combo{flavor, api, false})
		}
		if flavor != FlavorSysext { // --clusterclass refuses it (its download names one version)
			combos = append(combos, combo{flavor, CAPIv1beta2, true})
		}
	}
	for _, c := range combos {
		name := fmt.Sprintf("%s/%s/clusterclass=%v", c.flavor, c.api, c.clusterClass)
		t.Run(name, func(t *testing.T) {
			values := allValues(t, c.api)
			delete(values, VarSysextURL)
			if c.flavor == FlavorSysext {
				values[VarSysextSHA512] = strings.Repeat("5e", 64)
			}
			r, err := renderChecked(renderOptions{Flavor: c.flavor, CAPIAPI: c.api, ClusterClass: c.clusterClass, Values: values})
			if err != nil {
				t.Fatal(err)
			}
			docs, _ := ParseDocuments("manifests", r.Manifest)
			checked := 0
			for _, d := range docs {
				_, merged, ok := bootstrapIgnition(t, d)
				if !ok {
					continue
				}
				checkRetryResets(t, d.String(), kubeadmDropIn(t, merged))
				checked++
			}
			if checked != 2 {
				t.Fatalf("checked %d bootstrap configs, want 2", checked)
			}
		})
	}
}

// kubeadmDropIn is the contents of kubeadm.service's 10-flatcar.conf in cfg.
func kubeadmDropIn(t *testing.T, cfg igntypes.Config) string {
	t.Helper()
	for _, u := range cfg.Systemd.Units {
		for _, d := range u.Dropins {
			if u.Name == "kubeadm.service" && d.Name == "10-flatcar.conf" {
				return d.Contents
			}
		}
	}
	t.Fatalf("no kubeadm.service drop-in 10-flatcar.conf: %+v", cfg.Systemd.Units)
	return ""
}

// checkRetryResets reads the drop-in as systemd does (a trailing backslash continues a line)
// and wants, beside Restart=on-failure, an ExecStartPre shell script (valid for sh -n) that keeps
// /etc/kubernetes as Ignition wrote it before the first try and, before a retry while CABPK's
// success marker is absent, either (an init whose etcd has data) has kubeadm ignore preflight
// errors, or runs kubeadm reset and puts the copy back; and an ExecStartPost that removes the
// copy (it holds the CA key).
func checkRetryResets(t *testing.T, doc, dropIn string) {
	t.Helper()
	if strings.ContainsAny(dropIn, "$%") {
		t.Errorf("%s: the drop-in has $ or %%, which clusterctl's envsubst or systemd would expand:\n%s", doc, dropIn)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.ReplaceAll(dropIn, "\\\n", " "), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			lines[k] = append(lines[k], v)
		}
	}
	if strings.Join(lines["Restart"], " ") != "on-failure" {
		t.Fatalf("%s: Restart=%v, want on-failure:\n%s", doc, lines["Restart"], dropIn)
	}
	pre := lines["ExecStartPre"]
	if len(pre) != 1 || !strings.HasPrefix(pre[0], "/bin/sh -ec '") || !strings.HasSuffix(pre[0], "'") {
		t.Fatalf("%s: a failed kubeadm is retried without undoing it first: ExecStartPre=%q\n%s", doc, pre, dropIn)
	}
	script := strings.TrimSuffix(strings.TrimPrefix(pre[0], "/bin/sh -ec '"), "'")
	if strings.Contains(script, "'") {
		t.Fatalf("%s: a quote inside the ExecStartPre script: %s", doc, script)
	}
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%s: the ExecStartPre script is not valid sh: %v\n%s\n%s", doc, err, out, script)
	}
	keep := node.KubeadmRetryDir
	snapshot := strings.Index(script, "cp -a /etc/kubernetes "+keep+"/new/")
	marker := strings.Index(script, "[ -e /run/cluster-api/bootstrap-success.complete ]")
	resume := strings.Index(script, `grep -q "^kind: InitConfiguration" /etc/kubeadm.yml && [ -d /var/lib/etcd/member ]`)
	ignore := strings.Index(script, `sed -i "/^nodeRegistration:/r `)
	noKubelet := strings.Index(script, "rm -f /var/lib/kubelet/config.yaml")
	reset := strings.Index(script, "kubeadm reset -f")
	restore := strings.Index(script, "cp -a "+keep+"/before/kubernetes /etc/")
	if snapshot < 0 || marker < snapshot || resume < marker || ignore < resume || noKubelet < ignore || reset < noKubelet || restore < reset {
		t.Errorf("%s: the ExecStartPre script does not copy /etc/kubernetes on the first try, then, before a retry with no success marker, resume an init whose etcd started (preflight errors ignored), or else remove the kubelet's config, reset and restore the copy:\n%s", doc, script)
	}
	if post := lines["ExecStartPost"]; len(post) != 1 || post[0] != "/bin/rm -rf "+keep {
		t.Errorf("%s: ExecStartPost=%q, want the copy of the CA key removed after success", doc, post)
	}
}

// The ExecStartPre script of the rendered drop-in, run as kubeadm.service runs it (sh -ec, as
// root) with the real kubeadm v1.34.4, in a private mount and network namespace (/etc and
// /var/lib overlays on a temporary directory, /run a tmpfs): Ignition's files (CAs, keys made by
// kubeadm's own certs phases as CABPK's are, a user's static pod), the first try's copy, a
// half-done init (every file of kubeadm's certs, kubeconfig, etcd and control-plane phases, no
// etcd data yet) that real preflight refuses, then the retry: real kubeadm reset, Ignition's
// files back byte for byte, nothing of the first init left, preflight clean, new certificates
// signed by the same CA. Then a half-done init with etcd data: the retry keeps it all and real
// kubeadm's preflight passes on the config it edited; with CABPK's success marker no reset, and
// ExecStartPost removes the copy.
func TestKubeadmRetryScriptWithRealKubeadm(t *testing.T) {
	testutil.RequireReal(t, "the real kubeadm in a mount namespace")
	testutil.RequireRoot(t, "mount namespaces")
	testutil.RequireTools(t, "unshare", "sha256sum")
	bin := kubetest.RealNodeDir(t)
	r, err := renderChecked(renderOptions{Flavor: FlavorSysextBaked, CAPIAPI: CAPIv1beta2, Values: allValues(t, CAPIv1beta2)})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := ParseDocuments("manifests", r.Manifest)
	var pre, post string
	for _, d := range docs {
		if _, merged, ok := bootstrapIgnition(t, d); ok && d.Kind == "KubeadmControlPlane" {
			for _, l := range strings.Split(strings.ReplaceAll(kubeadmDropIn(t, merged), "\\\n", " "), "\n") {
				if v, ok := strings.CutPrefix(l, "ExecStartPre=/bin/sh -ec '"); ok {
					pre = strings.TrimSuffix(v, "'")
				}
				if v, ok := strings.CutPrefix(l, "ExecStartPost="); ok {
					post = v
				}
			}
		}
	}
	if pre == "" || post == "" {
		t.Fatalf("the control plane's kubeadm.service drop-in has no ExecStartPre sh -ec script or no ExecStartPost")
	}
	dir := t.TempDir()
	for name, cfg := range map[string]string{"kubeadm.yml": retryKubeadmConfig, "kubeadm-list.yml": retryKubeadmConfigWithList} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", retryHarness)
	cmd.Env = append(os.Environ(), "T="+dir, "KUBEADM_DIR="+bin, "PRE="+pre, "POST="+post)
	out, err := cmd.CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	section := func(name string) string {
		_, s, _ := strings.Cut(got, "== "+name+"\n")
		s, _, _ = strings.Cut("\n"+s, "\n== ")
		return s
	}
	if !strings.Contains(section("preflight before"), "FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml") {
		t.Fatalf("the half-done init does not fail kubeadm's preflight as on the node:\n%s", got)
	}
	if !strings.Contains(section("retry"), "[reset] Deleting contents of directories") {
		t.Errorf("the retry did not run kubeadm reset:\n%s", got)
	}
	ign := section("ignition's files")
	for _, f := range []string{"pki/ca.crt", "pki/ca.key", "pki/sa.key", "pki/sa.pub", "pki/etcd/ca.key", "pki/front-proxy-ca.key", "manifests/kube-vip.yaml"} {
		if !strings.Contains(ign, "./"+f+": OK") {
			t.Errorf("Ignition's %s did not survive the retry byte for byte:\n%s", f, got)
		}
	}
	if left := section("left"); strings.Contains(left, "apiserver") || strings.Contains(left, ".conf") || strings.Contains(left, "etcd.yaml") ||
		strings.Contains(left, "/var/lib/") {
		t.Errorf("the first init's files are left after the retry's reset:\n%s", left)
	}
	if s := section("preflight after"); strings.TrimSpace(s) != "" {
		t.Errorf("preflight still refuses after the reset:\n%s", s)
	}
	// /etc's overlay keeps what the namespace wrote: the CA put back and the new apiserver cert.
	if err := signedBy(filepath.Join(dir, "etc-up/kubernetes/pki/apiserver.crt"), filepath.Join(dir, "etc-up/kubernetes/pki/ca.crt")); err != nil {
		t.Errorf("the certificates after the reset are not signed by Ignition's CA: %v", err)
	}
	// An init whose etcd has data: no reset, kubeadm told to ignore preflight errors (once, however
	// often it retries; beside a user's own list), and real kubeadm's preflight passes on it.
	if s := section("resume"); strings.Contains(s, "[reset]") || !strings.Contains(s, "no reset") {
		t.Errorf("the retry of an init whose etcd has data reset the node, or did not say it resumes:\n%s", s)
	}
	if c := section("resumed config"); strings.Count(c, "  ignorePreflightErrors:\n  - all\n") != 1 || strings.Count(c, "- all") != 1 {
		t.Errorf("the resumed init's config does not ignore preflight errors exactly once:\n%s", c)
	}
	// (The harness has no CRI: kubeadm's image pull fails after the checks whatever they ignore.)
	resumedPreflight := func(name string) {
		s := section(name)
		if strings.Contains(s, "[ERROR ") || !strings.Contains(s, "[WARNING FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]") ||
			!strings.Contains(s, "[WARNING DirAvailable--var-lib-etcd]") {
			t.Errorf("real kubeadm's preflight does not take the first init's files as warnings with the resumed config (%s):\n%s\n%s", name, s, got)
		}
	}
	resumedPreflight("resumed preflight")
	if s := section("resumed left"); !strings.Contains(s, "/var/lib/etcd/member/wal") || !strings.Contains(s, "kube-apiserver.yaml") {
		t.Errorf("the resumed init lost etcd's data or its static pods:\n%s", s)
	}
	if c := section("resume with a list"); !strings.Contains(c, "  ignorePreflightErrors:\n  - all\n  criSocket:") || strings.Count(c, "ignorePreflightErrors") != 1 {
		t.Errorf("the resumed init's config with a user's list does not ignore all in its place (kubeadm refuses all beside a named check):\n%s", c)
	}
	resumedPreflight("resumed preflight with a list")
	if s := section("success"); !strings.Contains(s, "/etc/kubernetes/admin.conf") || strings.Contains(s, "[reset]") || !strings.Contains(s, "No such file") {
		t.Errorf("with CABPK's success marker the script reset the node, or ExecStartPost kept the copy:\n%s", s)
	}
}

// signedBy checks that the PEM certificate in certFile was signed by the one in caFile.
func signedBy(certFile, caFile string) error {
	var certs []*x509.Certificate
	for _, f := range []string{certFile, caFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			return fmt.Errorf("%s: no PEM", f)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return err
		}
		certs = append(certs, c)
	}
	return certs[0].CheckSignatureFrom(certs[1])
}

// retryKubeadmConfig is an init config in the block style CABPK writes /etc/kubeadm.yml in.
const retryKubeadmConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.34.4
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.26.0.10
nodeRegistration:
  criSocket: unix:///run/no-cri.sock
  name: proof-control-plane-0
`

// retryKubeadmConfigWithList is retryKubeadmConfig with a user's own ignorePreflightErrors.
var retryKubeadmConfigWithList = strings.Replace(retryKubeadmConfig, "  criSocket:", "  ignorePreflightErrors:\n  - Swap\n  criSocket:", 1)

// retryHarness runs in the private namespaces; "== name" starts each section the test reads.
const retryHarness = `set -e
mkdir -p "$T/etc-up" "$T/etc-work" "$T/var-up" "$T/var-work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$T/etc-up,workdir=$T/etc-work" /etc
mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$T/var-up,workdir=$T/var-work" /var/lib
mount -t tmpfs tmpfs /run
export PATH="$KUBEADM_DIR:$PATH"
cfg=/etc/kubeadm.yml
cp "$T/kubeadm.yml" "$cfg"
halfdone() {
  kubeadm init phase certs all --config "$cfg" >/dev/null
  kubeadm init phase kubeconfig all --config "$cfg" >/dev/null
  kubeadm init phase etcd local --config "$cfg" >/dev/null
  kubeadm init phase control-plane all --config "$cfg" >/dev/null
  mkdir -p /var/lib/kubelet && echo x > /var/lib/kubelet/config.yaml
}
for p in ca etcd-ca front-proxy-ca sa; do kubeadm init phase certs $p --config "$cfg" >/dev/null; done
mkdir -p /etc/kubernetes/manifests && echo user > /etc/kubernetes/manifests/kube-vip.yaml
(cd /etc/kubernetes && find . -type f | sort | xargs sha256sum) > "$T/ignition.sum"
echo "== first try"; sh -ec "$PRE"
halfdone
echo "== preflight before"; kubeadm init phase preflight --config "$cfg" --ignore-preflight-errors=all 2>&1 | grep -E 'FileAvailable|DirAvailable' || true
echo "== retry"; sh -ec "$PRE" 2>&1
echo "== ignition's files"; (cd /etc/kubernetes && sha256sum -c "$T/ignition.sum" 2>&1) || true
echo "== left"; find /etc/kubernetes /var/lib/etcd /var/lib/kubelet -type f 2>/dev/null | sort
echo "== preflight after"; kubeadm init phase preflight --config "$cfg" --ignore-preflight-errors=all 2>&1 | grep -E 'FileAvailable|DirAvailable' || true
echo "== certs after"; kubeadm init phase certs apiserver --config "$cfg" >/dev/null
halfdone
mkdir -p /var/lib/etcd/member && echo x > /var/lib/etcd/member/wal
echo "== resume"; sh -ec "$PRE" 2>&1; sh -ec "$PRE" 2>&1
echo "== resumed config"; cat "$cfg"
echo "== resumed preflight"; kubeadm init phase preflight --config "$cfg" 2>&1 | grep -E '\[(WARNING|ERROR) ' || true
echo "== resumed left"; find /var/lib/etcd /etc/kubernetes/manifests -type f | sort
cp "$T/kubeadm-list.yml" "$cfg"; rm /var/lib/flatcar-capo/kubeadm-retry/resumed
echo "== resume with a list"; sh -ec "$PRE" 2>&1; cat "$cfg"
echo "== resumed preflight with a list"; kubeadm init phase preflight --config "$cfg" 2>&1 | grep -E '\[(WARNING|ERROR) ' || true
echo "== success"; kubeadm init phase kubeconfig admin --config "$cfg" >/dev/null
mkdir -p /run/cluster-api && touch /run/cluster-api/bootstrap-success.complete
sh -ec "$PRE" 2>&1; ls /etc/kubernetes/admin.conf
sh -c "$POST"; ls -d /var/lib/flatcar-capo/kubeadm-retry 2>&1 || true
echo "== end"
`
