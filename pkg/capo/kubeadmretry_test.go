package capo

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// A kubeadm init that failed after writing its static pods (its control plane not healthy in
// 1200 s, seen in a node proof under load) failed every retry in preflight: every template's
// kubeadm.service that restarts on failure must undo the failed kubeadm first, in the user-data
// CABPK's renderer makes of it (flavor x CAPI API, and the ClusterClass).
func TestKubeadmRetryResetsFirst(t *testing.T) {
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
			r, err := Render(RenderOptions{Flavor: c.flavor, CAPIAPI: c.api, ClusterClass: c.clusterClass, Values: values})
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
// success marker is absent, runs kubeadm reset and puts the copy back; and an ExecStartPost that
// removes the copy (it holds the CA key).
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
	marker := strings.Index(script, "[ ! -e /run/cluster-api/bootstrap-success.complete ]")
	noKubelet := strings.Index(script, "rm -f /var/lib/kubelet/config.yaml")
	reset := strings.Index(script, "kubeadm reset -f")
	restore := strings.Index(script, "cp -a "+keep+"/before/kubernetes /etc/")
	if snapshot < 0 || marker < snapshot || noKubelet < marker || reset < noKubelet || restore < reset {
		t.Errorf("%s: the ExecStartPre script does not copy /etc/kubernetes on the first try, then, before a retry with no success marker, remove the kubelet's config, reset and restore the copy:\n%s", doc, script)
	}
	if post := lines["ExecStartPost"]; len(post) != 1 || post[0] != "/bin/rm -rf "+keep {
		t.Errorf("%s: ExecStartPost=%q, want the copy of the CA key removed after success", doc, post)
	}
}
