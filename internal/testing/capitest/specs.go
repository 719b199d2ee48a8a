package capitest

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// BridgeCNI is a CNI configuration for the plugins the image carries (bridge, host-local,
// portmap; loopback is kubelet's), as a KubeadmConfigSpec.files entry or a CNI add-on writes it.
// Each node gets the same pod range: enough for Ready nodes and host-network pods, not for pod
// traffic between nodes.
const BridgeCNI = `{
  "cniVersion": "1.0.0",
  "name": "node-proof",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "192.168.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// Additions are what a user adds to a KubeadmConfigSpec (KubeadmConfigSpec.files, .users and
// .preKubeadmCommands) before applying a `manifests` output: e.g. a login, a CNI configuration.
type Additions struct {
	Files              map[string]string // path -> content, mode 0644
	Users              []User
	PreKubeadmCommands []string // run after the manifest's own
}

// User is a KubeadmConfigSpec user: a login with its SSH key and groups ("sudo").
type User struct{ Name, SSHKey, Groups string }

// AddToSpecs rewrites the manifest file with controlPlane added to the KubeadmControlPlane's
// kubeadmConfigSpec and worker to the KubeadmConfigTemplate's spec (v1beta1 and v1beta2 share
// these fields). Each kind must be there once.
func AddToSpecs(manifest string, controlPlane, worker Additions) error {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	docs, err := splitDocs(b)
	if err != nil {
		return fmt.Errorf("%s: %w", manifest, err)
	}
	found := map[string]int{}
	for _, d := range docs {
		spec, _ := d["spec"].(map[string]any)
		switch d["kind"] {
		case "KubeadmControlPlane":
			add(mapAt(spec, "kubeadmConfigSpec"), controlPlane)
		case "KubeadmConfigTemplate":
			add(mapAt(mapAt(spec, "template"), "spec"), worker)
		default:
			continue
		}
		found[d["kind"].(string)]++
	}
	if found["KubeadmControlPlane"] != 1 || found["KubeadmConfigTemplate"] != 1 {
		return fmt.Errorf("%s: %v, want one KubeadmControlPlane and one KubeadmConfigTemplate", manifest, found)
	}
	out, err := joinDocs(docs)
	if err != nil {
		return err
	}
	return os.WriteFile(manifest, out, 0o600)
}

func add(spec map[string]any, a Additions) {
	files, _ := spec["files"].([]any)
	paths := make([]string, 0, len(a.Files))
	for p := range a.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		files = append(files, map[string]any{"path": p, "content": a.Files[p], "permissions": "0644"})
	}
	users, _ := spec["users"].([]any)
	for _, u := range a.Users {
		users = append(users, map[string]any{"name": u.Name, "sshAuthorizedKeys": []any{strings.TrimSpace(u.SSHKey)}, "groups": u.Groups})
	}
	if len(files) > 0 {
		spec["files"] = files
	}
	if len(users) > 0 {
		spec["users"] = users
	}
	if len(a.PreKubeadmCommands) > 0 {
		cmds, _ := spec["preKubeadmCommands"].([]any)
		for _, c := range a.PreKubeadmCommands {
			cmds = append(cmds, c)
		}
		spec["preKubeadmCommands"] = cmds
	}
}

// mapAt is m[key] as a map, made (and set) when missing.
func mapAt(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	if v == nil {
		v = map[string]any{}
		m[key] = v
	}
	return v
}
