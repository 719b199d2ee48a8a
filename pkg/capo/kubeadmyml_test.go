package capo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Real Ignition writes /etc/kubeadm.yml (the join token, or the init configuration) 0600, as
// CABPK asks; kubeadm.service then runs the templates' preKubeadmCommands, whose envsubst
// rewrote it through a new file with the shell's umask (0022 under systemd): the token was
// world-readable on every node (found by the stand-in guest's real Ignition, issue 43). Each
// template's commands run here in bash, with /etc/kubeadm.yml in a temporary directory.
func TestPreKubeadmCommandsKeepKubeadmYmlPrivate(t *testing.T) {
	testutil.RequireTools(t, "bash", "envsubst")
	type variant struct {
		api          string
		clusterClass bool
	}
	for _, v := range []variant{{CAPIv1beta1, false}, {CAPIv1beta2, false}, {CAPIv1beta2, true}} {
		r, err := renderChecked(renderOptions{CAPIAPI: v.api, ClusterClass: v.clusterClass, Values: allValues(t, v.api)})
		if err != nil {
			t.Fatal(err)
		}
		docs, err := ParseDocuments(v.api, r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, d := range docs {
			b, ok := newBootstrapSpec(d)
			if !ok || !b.runsEnvsubst() {
				continue
			}
			checked++
			dir := t.TempDir()
			yml := filepath.Join(dir, "kubeadm.yml")
			if err := os.WriteFile(yml, []byte("token: abcdef.0123456789abcdef\nname: ${COREOS_OPENSTACK_HOSTNAME}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			script := "set -e\numask 0022\n" + strings.ReplaceAll(strings.Join(getStrings(b.spec, "preKubeadmCommands"), "\n"), "/etc/kubeadm.yml", yml)
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "COREOS_OPENSTACK_HOSTNAME=node-0.novalocal", "COREOS_OPENSTACK_INSTANCE_UUID=6f1d2c3e")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s (%s): preKubeadmCommands: %v\n%s", d, v.api, err, out)
			}
			st, err := os.Stat(yml)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(yml)
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s (%s, clusterclass %v): /etc/kubeadm.yml is %v after preKubeadmCommands, want -rw------- (it holds the bootstrap token)",
					d, v.api, v.clusterClass, st.Mode().Perm())
			}
			if !strings.Contains(string(data), "name: node-0\n") {
				t.Errorf("%s: envsubst did not substitute: %q", d, data)
			}
		}
		if checked != 2 {
			t.Errorf("%s (clusterclass %v): %d bootstrap specs run envsubst on /etc/kubeadm.yml, want 2", v.api, v.clusterClass, checked)
		}
	}
}
