package capo

import (
	"strings"
)

// bootstrapSpec is the version-independent view of a KubeadmConfigSpec that the rules and the
// user-data estimate need; field names are the same in CAPI v1beta1 and v1beta2.
type bootstrapSpec struct {
	doc  *Document
	path Path           // where the KubeadmConfigSpec sits in the document
	spec map[string]any // the KubeadmConfigSpec itself
	// controlPlane is true for KubeadmControlPlane(Template): its user-data carries certificates.
	controlPlane bool
}

// bootstrapSpecPath returns where a document keeps its KubeadmConfigSpec, if it has one.
func bootstrapSpecPath(d *Document) (Path, bool) {
	switch {
	case d.Group() == "bootstrap.cluster.x-k8s.io" && d.Kind == "KubeadmConfigTemplate":
		return Path{"spec", "template", "spec"}, true
	case d.Group() == "bootstrap.cluster.x-k8s.io" && d.Kind == "KubeadmConfig":
		return Path{"spec"}, true
	case d.Group() == "controlplane.cluster.x-k8s.io" && d.Kind == "KubeadmControlPlane":
		return Path{"spec", "kubeadmConfigSpec"}, true
	case d.Group() == "controlplane.cluster.x-k8s.io" && d.Kind == "KubeadmControlPlaneTemplate":
		return Path{"spec", "template", "spec", "kubeadmConfigSpec"}, true
	}
	return nil, false
}

func newBootstrapSpec(d *Document) (*bootstrapSpec, bool) {
	p, ok := bootstrapSpecPath(d)
	if !ok {
		return nil, false
	}
	return &bootstrapSpec{doc: d, path: p, spec: getMap(d.obj, p...),
		controlPlane: d.Group() == "controlplane.cluster.x-k8s.io"}, true
}

// format is the bootstrap format; CABPK's default is cloud-config.
func (b *bootstrapSpec) format() string {
	if f := getString(b.spec, "format"); f != "" {
		return f
	}
	return "cloud-config"
}

func (b *bootstrapSpec) ignition() bool { return b.format() == "ignition" }

func (b *bootstrapSpec) additionalConfig() (string, bool) {
	x, ok := get(b.spec, "ignition", "containerLinuxConfig", "additionalConfig")
	s, _ := x.(string)
	return s, ok
}

// registrationConfigs names the kubeadm configurations whose nodeRegistration reaches a node:
// a control plane uses both init and join; a worker template joins; a KubeadmConfig uses the
// ones it has.
func (b *bootstrapSpec) registrationConfigs() []string {
	if b.controlPlane {
		return []string{"initConfiguration", "joinConfiguration"}
	}
	var out []string
	for _, c := range []string{"initConfiguration", "joinConfiguration"} {
		if _, ok := b.spec[c]; ok {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []string{"joinConfiguration"}
	}
	return out
}

// kubeletArg reads a kubeletExtraArgs entry in either form: a map (v1beta1) or a list of
// {name, value} (v1beta2). index is the list position, -1 for a map.
func kubeletArg(nodeReg map[string]any, name string) (value string, index int, ok bool) {
	switch args := nodeReg["kubeletExtraArgs"].(type) {
	case map[string]any:
		v, ok := args[name]
		s, _ := v.(string)
		return s, -1, ok
	case []any:
		for i, a := range args {
			if getString(a, "name") == name {
				return getString(a, "value"), i, true
			}
		}
	}
	return "", -1, false
}

// runsEnvsubst reports whether a preKubeadmCommand substitutes variables in /etc/kubeadm.yml,
// which is what turns ${COREOS_OPENSTACK_*} into values on the node.
func (b *bootstrapSpec) runsEnvsubst() bool {
	for _, c := range getStrings(b.spec, "preKubeadmCommands") {
		if strings.Contains(c, "envsubst") && strings.Contains(c, "/etc/kubeadm.yml") {
			return true
		}
	}
	return false
}
