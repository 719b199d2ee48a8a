package capo

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	orcv1alpha1 "github.com/k-orc/openstack-resource-controller/v2/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	capov1beta1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	kubeadmv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kcpv1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	kcpv1beta2 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1beta2 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Documents decode strictly into their upstream Go types, in the versions go.mod pins (CAPI's
// api module, CAPO, ORC, k8s.io/api), so that CAPI's own validation (validate.go) runs on the
// very values a management cluster would get.

// apiTypes are the documents with an upstream type, by apiVersion and kind. Older CAPO versions
// (v1alpha5 to v1alpha7) are not in CAPO v0.14's module: they are linted by the
// version-independent rules only. ORC's Image is v2.4.0's, the ORC CAPO v0.14 pins.
var apiTypes = typesByKind(
	"v1", &corev1.Secret{}, &corev1.ConfigMap{},
	"cluster.x-k8s.io/v1beta1", &clusterv1beta1.Cluster{}, &clusterv1beta1.MachineDeployment{},
	&clusterv1beta1.MachineSet{}, &clusterv1beta1.Machine{}, &clusterv1beta1.MachinePool{},
	&clusterv1beta1.MachineHealthCheck{},
	"cluster.x-k8s.io/v1beta2", &clusterv1beta2.Cluster{}, &clusterv1beta2.ClusterClass{}, &clusterv1beta2.MachineDeployment{},
	&clusterv1beta2.MachineSet{}, &clusterv1beta2.Machine{}, &clusterv1beta2.MachinePool{},
	&clusterv1beta2.MachineHealthCheck{},
	"bootstrap.cluster.x-k8s.io/v1beta1", &kubeadmv1beta1.KubeadmConfig{}, &kubeadmv1beta1.KubeadmConfigTemplate{},
	"bootstrap.cluster.x-k8s.io/v1beta2", &kubeadmv1beta2.KubeadmConfig{}, &kubeadmv1beta2.KubeadmConfigTemplate{},
	"controlplane.cluster.x-k8s.io/v1beta1", &kcpv1beta1.KubeadmControlPlane{}, &kcpv1beta1.KubeadmControlPlaneTemplate{},
	"controlplane.cluster.x-k8s.io/v1beta2", &kcpv1beta2.KubeadmControlPlane{}, &kcpv1beta2.KubeadmControlPlaneTemplate{},
	"infrastructure.cluster.x-k8s.io/v1beta1", &capov1beta1.OpenStackCluster{},
	&capov1beta1.OpenStackClusterTemplate{}, &capov1beta1.OpenStackMachine{}, &capov1beta1.OpenStackMachineTemplate{},
	"openstack.k-orc.cloud/v1alpha1", &orcv1alpha1.Image{},
)

// typesByKind reads a list of apiVersions, each followed by pointers to its types.
func typesByKind(list ...any) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var version string
	for _, x := range list {
		if s, ok := x.(string); ok {
			version = s
			continue
		}
		t := reflect.TypeOf(x).Elem()
		out[version+"/"+t.Name()] = t
	}
	return out
}

// lookupType is the upstream type of apiVersion/kind, or nil.
func lookupType(apiVersion, kind string) reflect.Type { return apiTypes[apiVersion+"/"+kind] }

// typeOf returns the upstream type of a document, or nil when this tool has none for it.
func typeOf(d *Document) reflect.Type { return lookupType(d.APIVersion, d.Kind) }

// newOf is a pointer to a new zero value of t.
func newOf(t reflect.Type) any { return reflect.New(t).Interface() }

// decodeStrict decodes a document into its upstream Go type, rejecting unknown fields and
// mistyped values; it returns a pointer to the upstream value. It fails for documents whose
// apiVersion/kind this tool does not know.
func decodeStrict(d *Document) (any, error) {
	t := typeOf(d)
	if t == nil {
		return nil, fmt.Errorf("%s: no Go type known for %s %s", d, d.APIVersion, d.Kind)
	}
	raw, err := json.Marshal(d.obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	v := newOf(t)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("%s does not decode into %s.%s: %w", d, t.PkgPath(), t.Name(), err)
	}
	return v, nil
}

// unknownFields lists every field path of d that its upstream type does not have (all of
// them, where a strict decoder stops at the first). Nil when the type is unknown.
func unknownFields(d *Document) []Path {
	t := typeOf(d)
	if t == nil {
		return nil
	}
	var out []Path
	walkUnknown(d.obj, t, nil, &out)
	return out
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

func walkUnknown(v any, t reflect.Type, path Path, out *[]Path) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // custom decoding (Time, IntOrString, Quantity, JSON): a leaf for this purpose
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for k, fv := range m {
			ft, ok := fields[k]
			if !ok {
				*out = append(*out, path.Child(k))
				continue
			}
			walkUnknown(fv, ft, path.Child(k), out)
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k, fv := range m {
				walkUnknown(fv, t.Elem(), path.Child(k), out)
			}
		}
	case reflect.Slice, reflect.Array:
		if l, ok := v.([]any); ok && t.Elem().Kind() != reflect.Uint8 {
			for i, ev := range l {
				walkUnknown(ev, t.Elem(), path.Child(i), out)
			}
		}
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the JSON field names of a struct type with their types, inlined
// (embedded or `json:",inline"`) structs flattened, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(opts, "inline")) {
			for k, v := range jsonFields(ft) {
				if _, dup := fields[k]; !dup {
					fields[k] = v
				}
			}
			continue
		}
		name = cmp.Or(name, f.Name)
		fields[name] = f.Type
	}
	fieldCache.Store(t, fields)
	return fields
}

// uncheckedNewer reports a document of a checked group that lint has no type for, when its
// apiVersion is newer than every version it has one for (or the kind has none): a release this
// build does not know. Older versions (CAPO v1alpha5 to v1alpha7) are linted by the
// version-independent rules, as documented. known lists the apiVersions that have a type.
func uncheckedNewer(d *Document) (known []string, ok bool) {
	// The checked groups are those whose documents lint decodes into upstream types, so a
	// document of an apiVersion it has no type for must say that it went unchecked.
	g := d.Group()
	if typeOf(d) != nil || !strings.HasSuffix(g, "cluster.x-k8s.io") && g != "openstack.k-orc.cloud" {
		return nil, false
	}
	_, version, _ := strings.Cut(d.APIVersion, "/")
	for _, v := range []string{"v1alpha1", "v1beta1", "v1beta2"} {
		if lookupType(g+"/"+v, d.Kind) != nil {
			if versionRank(version) <= versionRank(v) {
				return nil, false
			}
			known = append(known, g+"/"+v)
		}
	}
	return known, true
}

// versionRank orders Kubernetes API versions: v1alpha1 < v1beta1 < v1beta2 < v1 < v2alpha1.
func versionRank(v string) int {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return -1
	}
	digits := func(s string) (int, string) {
		n, i := 0, 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			n = n*10 + int(s[i]-'0')
		}
		return n, s[i:]
	}
	major, rest := digits(rest)
	rank := major * 1000
	switch {
	case rest == "":
		return rank + 999
	case strings.HasPrefix(rest, "alpha"):
		minor, _ := digits(rest[len("alpha"):])
		return rank + minor
	case strings.HasPrefix(rest, "beta"):
		minor, _ := digits(rest[len("beta"):])
		return rank + 100 + minor
	}
	return -1
}
