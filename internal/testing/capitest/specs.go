package capitest

import (
	"fmt"
	"maps"
	"os"
	"slices"
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
	// ExtraArgs are flags for the control plane's components (clusterConfiguration's
	// controllerManager, scheduler, apiServer: component -> flag -> value), set over the
	// manifest's; the KubeadmControlPlane's only.
	ExtraArgs map[string]map[string]string
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
			v1beta2 := strings.HasSuffix(fmt.Sprint(d["apiVersion"]), "/v1beta2")
			setExtraArgs(mapAt(mapAt(spec, "kubeadmConfigSpec"), "clusterConfiguration"), controlPlane.ExtraArgs, v1beta2)
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

// setExtraArgs sets each component's flags in clusterConfiguration: v1beta1's extraArgs is a
// map, v1beta2's a list of {name, value} (a flag set there already is replaced).
func setExtraArgs(cc map[string]any, args map[string]map[string]string, v1beta2 bool) {
	for _, component := range slices.Sorted(maps.Keys(args)) {
		c := mapAt(cc, component)
		flags := args[component]
		if !v1beta2 {
			m := mapAt(c, "extraArgs")
			for k, v := range flags {
				m[k] = v
			}
			continue
		}
		list, _ := c["extraArgs"].([]any)
		kept := list[:0]
		for _, a := range list {
			if e, _ := a.(map[string]any); e == nil || flags[fmt.Sprint(e["name"])] == "" {
				kept = append(kept, a)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(flags)) {
			kept = append(kept, map[string]any{"name": k, "value": flags[k]})
		}
		c["extraArgs"] = kept
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
