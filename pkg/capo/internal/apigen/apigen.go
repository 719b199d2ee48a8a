// Package apigen writes pkg/capo's mirror of the upstream API types
// (internal/apimirror/zz_generated.go): plain structs with the upstream field names, json tags,
// kinds and nesting, so that lint decodes as strictly as into the upstream types without
// linking them into the binary (their package inits cost ~10 ms of every command's start-up).
// Only the generator and the tests import the upstream packages, in the versions go.mod pins.
package apigen

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"go/format"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

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

// Kind is one apiVersion/kind pkg/capo decodes strictly, with its upstream Go type.
type Kind struct {
	APIVersion string
	Type       reflect.Type
}

// Kinds are the documents with an upstream type. Older CAPO versions (v1alpha5 to v1alpha7) are
// not in CAPO v0.14's module: they are linted by the version-independent rules only. ORC's Image
// is v2.4.0's, the ORC CAPO v0.14 pins.
var Kinds = kinds(
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

// kinds reads a list of apiVersions, each followed by pointers to its types.
func kinds(list ...any) []Kind {
	var out []Kind
	var version string
	for _, x := range list {
		if s, ok := x.(string); ok {
			version = s
			continue
		}
		out = append(out, Kind{version, reflect.TypeOf(x).Elem()})
	}
	return out
}

// Prefixes name each upstream package in the mirror: type T of that package becomes
// <prefix>_T. A version bump that reaches a new package fails generation until it is added here.
var Prefixes = map[string]string{
	"k8s.io/api/core/v1":                                             "Corev1",
	"k8s.io/apimachinery/pkg/apis/meta/v1":                           "Metav1",
	"k8s.io/apimachinery/pkg/util/intstr":                            "Intstr",
	"k8s.io/apimachinery/pkg/types":                                  "Types",
	"k8s.io/apimachinery/pkg/api/resource":                           "Resource",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1":       "Apiextv1",
	"sigs.k8s.io/cluster-api/api/core/v1beta1":                       "Clusterv1beta1",
	"sigs.k8s.io/cluster-api/api/core/v1beta2":                       "Clusterv1beta2",
	"sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1":          "Kubeadmv1beta1",
	"sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2":          "Kubeadmv1beta2",
	"sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1":       "Kcpv1beta1",
	"sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2":       "Kcpv1beta2",
	"sigs.k8s.io/cluster-api/errors":                                 "Capierrors",
	"sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1":         "Capov1beta1",
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/utils/optional":  "Capooptional",
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/utils/errors":    "Capoerrors",
	"github.com/k-orc/openstack-resource-controller/v2/api/v1alpha1": "Orcv1alpha1",
}

// Leaves are the upstream types that decode JSON themselves (json.Unmarshaler). Their mirrors are
// hand-written in apimirror/leaves.go (same verdicts, same errors); a type of the graph that
// implements json.Unmarshaler or encoding.TextUnmarshaler and is not listed fails generation.
var Leaves = map[string]bool{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":                                  true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":                              true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":                              true,
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString":                            true,
	"k8s.io/apimachinery/pkg/api/resource.Quantity":                              true,
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON":              true,
	"sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1.BootstrapTokenString": true,
	"sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2.BootstrapTokenString": true,
}

var (
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// Qualified is a named type's "import/path.Name".
func Qualified(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// IsLeaf reports whether t decodes JSON itself (a leaf of the mirror).
func IsLeaf(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// MirrorName is the name of a named upstream type's mirror.
func MirrorName(t reflect.Type) (string, error) {
	prefix, ok := Prefixes[t.PkgPath()]
	if !ok {
		return "", fmt.Errorf("apigen: type %s is in package %s, which has no mirror prefix: add one to apigen.Prefixes", Qualified(t), t.PkgPath())
	}
	return prefix + "_" + t.Name(), nil
}

type generator struct {
	defs  map[string]string // mirror name -> its declaration
	pkgs  map[string]string // prefix -> the Go package name reflect prints
	queue []reflect.Type
	err   error
}

// Generate returns the mirror file's content.
func Generate() ([]byte, error) {
	g := &generator{defs: map[string]string{}, pkgs: map[string]string{}}
	var b bytes.Buffer
	b.WriteString("// Code generated by pkg/capo/internal/apigen from the upstream API types (go generate ./pkg/capo). DO NOT EDIT.\n\n")
	b.WriteString("package apimirror\n\nimport \"reflect\"\n\n")
	b.WriteString("// Lookup returns the mirror of the upstream type of apiVersion/kind with that type's package\n")
	b.WriteString("// path and name, or nil.\n")
	b.WriteString("func Lookup(apiVersion, kind string) (mirror reflect.Type, pkgPath, name string) {\n\tswitch apiVersion + \"/\" + kind {\n")
	for _, k := range Kinds {
		name := g.typeExpr(k.Type)
		fmt.Fprintf(&b, "\tcase %q:\n\t\treturn reflect.TypeFor[%s](), %q, %q\n", k.APIVersion+"/"+k.Type.Name(), name, k.Type.PkgPath(), k.Type.Name())
	}
	b.WriteString("\t}\n\treturn nil, \"\", \"\"\n}\n\n")

	for len(g.queue) > 0 && g.err == nil {
		t := g.queue[0]
		g.queue = g.queue[1:]
		g.define(t)
	}
	if g.err != nil {
		return nil, g.err
	}
	prefixes := slices.Sorted(maps.Keys(g.pkgs))
	b.WriteString("// packageName is the Go package name of the upstream package a mirror prefix stands for.\n")
	b.WriteString("func packageName(prefix string) (string, bool) {\n\tswitch prefix {\n")
	for _, p := range prefixes {
		fmt.Fprintf(&b, "\tcase %q:\n\t\treturn %q, true\n", p, g.pkgs[p])
	}
	b.WriteString("\t}\n\treturn \"\", false\n}\n")
	for _, n := range slices.Sorted(maps.Keys(g.defs)) {
		b.WriteString("\n")
		b.WriteString(g.defs[n])
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("apigen: formatting the mirror: %w", err)
	}
	return out, nil
}

func (g *generator) fail(format string, args ...any) string {
	if g.err == nil {
		g.err = fmt.Errorf("apigen: "+format, args...)
	}
	return "invalid"
}

// typeExpr is the Go expression of t's mirror, queueing the named types it needs.
func (g *generator) typeExpr(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == "" {
			return t.Name() // bool, int32, string, ...
		}
		name, err := MirrorName(t)
		if err != nil {
			if g.err == nil {
				g.err = err
			}
			return "invalid"
		}
		g.pkgs[Prefixes[t.PkgPath()]], _, _ = strings.Cut(t.String(), ".")
		if IsLeaf(t) {
			if !Leaves[Qualified(t)] {
				return g.fail("%s decodes JSON itself (UnmarshalJSON or UnmarshalText): write its mirror %s in apimirror/leaves.go, accepting and rejecting what upstream's does, and add it to apigen.Leaves", Qualified(t), name)
			}
			return name
		}
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = "" // queued
			g.queue = append(g.queue, t)
		}
		return name
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + g.typeExpr(t.Elem())
	case reflect.Slice:
		return "[]" + g.typeExpr(t.Elem())
	case reflect.Array:
		return "[" + strconv.Itoa(t.Len()) + "]" + g.typeExpr(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String || IsLeaf(t.Key()) {
			return g.fail("map key type %s is not a plain string kind", t.Key())
		}
		return "map[" + g.typeExpr(t.Key()) + "]" + g.typeExpr(t.Elem())
	}
	return g.fail("unsupported unnamed type %s (kind %s)", t, t.Kind())
}

// define writes the declaration of a named, non-leaf upstream type's mirror.
func (g *generator) define(t reflect.Type) {
	name, _ := MirrorName(t)
	var b strings.Builder
	switch t.Kind() {
	case reflect.Struct:
		fmt.Fprintf(&b, "type %s struct {\n", name)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, hasTag := f.Tag.Lookup("json")
			if tag == "-" || !f.IsExported() && !f.Anonymous {
				continue // encoding/json never sets these
			}
			if f.Anonymous {
				et := f.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if !f.IsExported() || et.Kind() != reflect.Struct || et.Name() == "" {
					g.fail("%s embeds %s, which the mirror cannot reproduce", Qualified(t), f.Type)
					return
				}
				b.WriteString("\t" + g.typeExpr(f.Type))
			} else {
				b.WriteString("\t" + f.Name + " " + g.typeExpr(f.Type))
			}
			if hasTag {
				b.WriteString(" `json:" + strconv.Quote(tag) + "`")
			}
			b.WriteString("\n")
		}
		b.WriteString("}\n")
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		fmt.Fprintf(&b, "type %s %s\n", name, t.Kind())
	case reflect.Pointer:
		fmt.Fprintf(&b, "type %s *%s\n", name, g.typeExpr(t.Elem()))
	case reflect.Slice:
		fmt.Fprintf(&b, "type %s []%s\n", name, g.typeExpr(t.Elem()))
	case reflect.Map:
		if t.Key().Kind() != reflect.String || IsLeaf(t.Key()) {
			g.fail("map key type %s of %s is not a plain string kind", t.Key(), Qualified(t))
			return
		}
		fmt.Fprintf(&b, "type %s map[%s]%s\n", name, g.typeExpr(t.Key()), g.typeExpr(t.Elem()))
	default:
		g.fail("unsupported type %s (kind %s)", Qualified(t), t.Kind())
		return
	}
	g.defs[name] = b.String()
}
