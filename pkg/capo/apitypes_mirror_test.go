package capo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo/internal/apigen"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo/internal/apimirror"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeadmv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The tests hold pkg/capo's mirror types (internal/apimirror) to the upstream types they are
// generated from: test binaries may link the upstream packages, the product does not.

var upstreamTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, k := range apigen.Kinds {
		m[k.APIVersion+"/"+k.Type.Name()] = k.Type
	}
	return m
}()

// decodeInto is DecodeStrict as it was with the upstream types linked.
func decodeInto(d *Document, t reflect.Type) (any, error) {
	if t == nil {
		return nil, fmt.Errorf("%s: no Go type known for %s %s", d, d.APIVersion, d.Kind)
	}
	raw, err := json.Marshal(d.obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	v := reflect.New(t).Interface()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("%s does not decode into %s.%s: %w", d, t.PkgPath(), t.Name(), err)
	}
	return v, nil
}

// decodeUpstream decodes d strictly into its upstream type, for tests that read its fields, after
// checking that DecodeStrict (into the mirror) says the same.
func decodeUpstream(d *Document) (any, error) {
	v, err := decodeInto(d, upstreamTypes[d.APIVersion+"/"+d.Kind])
	if _, merr := DecodeStrict(d); errText(merr) != errText(err) {
		return nil, fmt.Errorf("mirror and upstream types disagree on %s:\nmirror:   %v\nupstream: %v", d, merr, err)
	}
	return v, err
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func unknownPaths(d *Document, t reflect.Type) []string {
	var paths []Path
	if t != nil {
		walkUnknown(d.obj, t, nil, &paths)
	}
	out := []string{}
	for _, p := range paths {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

// Drift: the checked-in mirror is what the generator makes from go.mod's versions.
func TestMirrorUpToDate(t *testing.T) {
	want, err := apigen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("internal/apimirror/zz_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/apimirror/zz_generated.go is not what apigen generates from the upstream types go.mod pins: run `make generate`")
	}
}

// Shape: every type reachable from a registered kind has a mirror of the same kind, with the
// same json-visible fields (Go names, embedding, json tags, order), and the same leaves.
func TestMirrorShape(t *testing.T) {
	visible := func(t reflect.Type) []reflect.StructField {
		var out []reflect.StructField
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if tag := f.Tag.Get("json"); tag != "-" && (f.IsExported() || f.Anonymous) {
				out = append(out, f)
			}
		}
		return out
	}
	seen := map[[2]reflect.Type]bool{}
	leaves := map[string]bool{}
	var walk func(path string, u, m reflect.Type)
	walk = func(path string, u, m reflect.Type) {
		if seen[[2]reflect.Type{u, m}] {
			return
		}
		seen[[2]reflect.Type{u, m}] = true
		if u.Kind() != m.Kind() || (u.Name() == "") != (m.Name() == "") {
			t.Errorf("%s: upstream %s (%s), mirror %s (%s)", path, u, u.Kind(), m, m.Kind())
			return
		}
		if u.Name() != "" && u.PkgPath() != "" {
			if want, _ := apigen.MirrorName(u); m.Name() != want || apimirror.UpstreamString(m) != u.String() {
				t.Errorf("%s: upstream %s mirrored by %s", path, u, m)
			}
		} else if u != m && u.Name() != "" {
			t.Errorf("%s: upstream %s, mirror %s", path, u, m)
		}
		uLeaf, mLeaf := apigen.IsLeaf(u), reflect.PointerTo(m).Implements(unmarshalerType)
		if uLeaf || mLeaf {
			if !uLeaf || !mLeaf {
				t.Errorf("%s: upstream %s decodes JSON itself: %v, mirror %s: %v", path, u, uLeaf, m, mLeaf)
			}
			leaves[apigen.Qualified(u)] = true
			return
		}
		switch u.Kind() {
		case reflect.Pointer, reflect.Slice:
			walk(path+"[]", u.Elem(), m.Elem())
		case reflect.Array:
			if u.Len() != m.Len() {
				t.Errorf("%s: array lengths %d, %d", path, u.Len(), m.Len())
			}
			walk(path+"[]", u.Elem(), m.Elem())
		case reflect.Map:
			walk(path+"{key}", u.Key(), m.Key())
			walk(path+"{}", u.Elem(), m.Elem())
		case reflect.Struct:
			uf, mf := visible(u), visible(m)
			if len(uf) != len(mf) {
				t.Errorf("%s: upstream %s has %d json fields, mirror %d", path, u, len(uf), len(mf))
				return
			}
			for i := range uf {
				a, b := uf[i], mf[i]
				name := b.Name
				if b.Anonymous {
					name = apimirror.UpstreamName(name)
				}
				at, aok := a.Tag.Lookup("json")
				bt, bok := b.Tag.Lookup("json")
				if a.Name != name || a.Anonymous != b.Anonymous || at != bt || aok != bok {
					t.Errorf("%s: upstream field %s %v %q, mirror %s %v %q", path, a.Name, a.Anonymous, a.Tag, b.Name, b.Anonymous, b.Tag)
					continue
				}
				walk(path+"."+a.Name, a.Type, b.Type)
			}
		}
	}
	for _, k := range apigen.Kinds {
		m, pkgPath, name := apimirror.Lookup(k.APIVersion, k.Type.Name())
		if m == nil || pkgPath != k.Type.PkgPath() || name != k.Type.Name() {
			t.Errorf("Lookup(%s, %s) = %v, %s.%s", k.APIVersion, k.Type.Name(), m, pkgPath, name)
			continue
		}
		walk(k.APIVersion+"/"+name, k.Type, m)
	}
	for l := range apigen.Leaves {
		if !leaves[l] {
			t.Errorf("leaf %s is listed but not reached", l)
		}
	}
	if len(seen) < 400 {
		t.Errorf("only %d types compared", len(seen))
	}
}

// corpus is every document of templates/ (as written and rendered in every flavor and image
// reference), testdata/ and the examples.
func corpus(t *testing.T) []*Document {
	t.Helper()
	var docs []*Document
	add := func(name string, data []byte) {
		d, _ := ParseDocuments(name, data) // the documents before a syntax error count
		docs = append(docs, d...)
	}
	for _, api := range capiAPIs {
		tmpl, err := Template(api)
		if err != nil {
			t.Fatal(err)
		}
		add("template-"+api, tmpl)
		for _, flavor := range FlavorNames() {
			for _, ref := range []string{ImageRefFilter, ImageRefID, ImageRefORC} {
				values := allValues(t, api)
				delete(values, VarSysextURL)
				if ref == ImageRefID {
					values[VarImageID] = "6f0c6f5e-0000-4000-8000-000000000001"
				}
				if flavor == FlavorSysext {
					values[VarSysextSHA512] = strings.Repeat("5e", 64)
				}
				opts := RenderOptions{CAPIAPI: api, Flavor: flavor, Values: values, ImageRef: ref}
				if ref == ImageRefORC {
					opts.ImageSource = &ImageSource{URL: "http://10.0.0.5/f.qcow2", SHA512: strings.Repeat("ab", 64), Arch: "amd64", MinDiskGiB: 9}
				}
				r, err := Render(opts)
				if err != nil {
					t.Fatalf("%s %s %s: %v", api, flavor, ref, err)
				}
				add(api+"-"+flavor+"-"+ref, r.Manifest)
			}
		}
	}
	for _, flavor := range []string{FlavorBaked, FlavorSysextBaked} {
		for _, withoutLB := range []bool{false, true} {
			values := allValues(t, CAPIv1beta2)
			delete(values, VarSysextURL)
			if withoutLB {
				delete(values, "CONTROL_PLANE_MACHINE_COUNT")
			}
			r, err := Render(RenderOptions{Flavor: flavor, Values: values, ClusterClass: true, WithoutAPILoadBalancer: withoutLB})
			if err != nil {
				t.Fatalf("clusterclass %s: %v", flavor, err)
			}
			add(fmt.Sprintf("clusterclass-%s-lb=%v", flavor, !withoutLB), r.Manifest)
		}
	}
	add("lint_test.go", []byte(lintLastAppliedKCP+"---\n"+lintMachineDeploymentV1beta2+"---\n"+lintFuzzSeedKCP))
	for _, glob := range []string{"../../testdata/*/*.yaml", "../../examples/*/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			add(f, data)
		}
	}
	return docs
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = clone(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = clone(e)
		}
		return l
	}
	return v
}

// mutants replaces each node of obj in turn (a copy each time) by what f returns for it.
func mutants(obj map[string]any, f func(v any) []any) []map[string]any {
	var out []map[string]any
	var visit func(v any, set func(any))
	visit = func(v any, set func(any)) {
		for _, r := range f(v) {
			set(r)
			out = append(out, clone(obj).(map[string]any))
		}
		set(v)
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if k == "apiVersion" || k == "kind" {
					continue
				}
				visit(v[k], func(r any) { v[k] = r })
			}
		case []any:
			for i := range v {
				visit(v[i], func(r any) { v[i] = r })
			}
		}
	}
	obj = clone(obj).(map[string]any)
	visit(obj, func(any) {})
	return out
}

// wrongTypes are the replacements of a node: an unknown field beside a map's fields, and
// values of every other JSON kind.
func wrongTypes(v any) []any {
	switch v := v.(type) {
	case map[string]any:
		m := clone(v).(map[string]any)
		m["zzUnknownField"] = "x"
		return []any{m, "x", []any{"x"}}
	case []any:
		return []any{"x", map[string]any{"a": "b"}}
	case string:
		return []any{12345, true, []any{v}, map[string]any{"a": v}}
	case bool:
		return []any{"yes", 1}
	case nil:
		return []any{"x"}
	default: // numbers
		return []any{"abc", 1.5, true, 1e12, -1}
	}
}

// leafProbes are values for the types that decode JSON themselves: good and bad quantities,
// times, durations, int-or-strings, bootstrap tokens, and other JSON kinds.
var leafProbes = []any{
	"1Gi", "500m", "1.5", "+1", "-1e3", ".5n", "1e-20", "0.000000001", "123456789012345678901234", "1.", ".", "+", "-m",
	".e-10", "+.e-10", "-.E-20", "0000000000000000000000.e-3", "1.2.3", "Gi", "1Zi", "1iK", "1e", "1e+", "1E3", "", " 2 ", "2Ei", "99999999999999999999Ei", "1e9223372036854775807",
	3, 3.5, -1, 1e30, 2147483648, -2147483649, "100%",
	"2026-01-01T00:00:00Z", "2026-01-01T00:00:00+02:00", "2026-01-01", "2026-13-01T00:00:00Z",
	"10m", "1h30m", "-5s", "10x", "abc",
	"abcdef.0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef0123456789abcdef", `abc"def.0123456789abcdef`,
	true, false, nil, map[string]any{"a": 1}, []any{1}, []any{},
}

// leafPaths finds, for each leaf type reachable from t, up to two shortest paths to it.
func leafPaths(t reflect.Type) [][]any {
	type item struct {
		t    reflect.Type
		path []any
	}
	var out [][]any
	found := map[reflect.Type]int{}
	queue := []item{{t, nil}}
	visits := map[reflect.Type]int{}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		ty := it.t
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		if apigen.IsLeaf(ty) {
			if found[ty] < 2 {
				found[ty]++
				out = append(out, it.path)
			}
			continue
		}
		if visits[ty]++; visits[ty] > 2 || len(it.path) > 14 {
			continue
		}
		next := func(step any, et reflect.Type) {
			p := append(append([]any{}, it.path...), step)
			queue = append(queue, item{et, p})
		}
		switch ty.Kind() {
		case reflect.Struct:
			fields := jsonFields(ty)
			names := make([]string, 0, len(fields))
			for n := range fields {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				next(n, fields[n])
			}
		case reflect.Slice, reflect.Array:
			next(0, ty.Elem())
		case reflect.Map:
			next("k", ty.Elem())
		}
	}
	return out
}

// typeAt is the type at a path leafPaths found.
func typeAt(t reflect.Type, path []any) reflect.Type {
	for _, step := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if name, ok := step.(string); ok && t.Kind() == reflect.Struct {
			t = jsonFields(t)[name]
		} else {
			t = t.Elem()
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// setPath sets obj's value at path (string keys, int indexes), making the maps and lists on the way.
func setPath(obj map[string]any, path []any, v any) {
	var cur any = obj
	for i, step := range path {
		last := i == len(path)-1
		var child any = v
		if !last {
			if _, ok := path[i+1].(int); ok {
				child = []any{nil}
			} else {
				child = map[string]any{}
			}
		}
		switch c := cur.(type) {
		case map[string]any:
			if existing, ok := c[step.(string)]; ok && !last {
				child = existing
			}
			c[step.(string)] = child
		case []any:
			if c[0] != nil && !last {
				child = c[0]
			}
			c[0] = child
		}
		cur = child
	}
}

// compareDecode fails t when DecodeStrict or UnknownFields say something else with the mirror
// than with the upstream types; it reports whether d was rejected and had unknown fields.
func compareDecode(t *testing.T, d *Document) (rejected, unknown bool) {
	t.Helper()
	ut := upstreamTypes[d.APIVersion+"/"+d.Kind]
	_, uerr := decodeInto(d, ut)
	_, merr := DecodeStrict(d)
	if errText(uerr) != errText(merr) {
		raw, _ := json.Marshal(d.obj)
		t.Errorf("DecodeStrict differs on %.300s\nmirror:   %v\nupstream: %v", raw, merr, uerr)
	}
	up, mp := unknownPaths(d, ut), UnknownFields(d)
	ms := []string{}
	for _, p := range mp {
		ms = append(ms, p.String())
	}
	sort.Strings(ms)
	if strings.Join(up, " ") != strings.Join(ms, " ") {
		raw, _ := json.Marshal(d.obj)
		t.Errorf("UnknownFields differs on %.300s\nmirror:   %v\nupstream: %v", raw, ms, up)
	}
	return uerr != nil, len(up) > 0
}

// Equivalence: on every corpus document and its mutants, DecodeStrict's verdict and error and
// UnknownFields' paths are the same with the mirror as with the upstream types.
func TestMirrorDecodesAsUpstream(t *testing.T) {
	var checked, rejected, unknown int
	check := func(d *Document) {
		t.Helper()
		rej, unk := compareDecode(t, d)
		checked++
		if rej {
			rejected++
		}
		if unk {
			unknown++
		}
	}
	docs := corpus(t)
	typed := 0
	same := map[string]bool{} // the flavors share most documents
	for _, d := range docs {
		raw, _ := json.Marshal(d.obj)
		if same[string(raw)] {
			continue
		}
		same[string(raw)] = true
		check(d)
		if upstreamTypes[d.APIVersion+"/"+d.Kind] == nil {
			continue
		}
		typed++
		for _, m := range mutants(d.obj, wrongTypes) {
			check(&Document{File: d.File, Index: d.Index, Line: d.Line, APIVersion: d.APIVersion, Kind: d.Kind, Name: d.Name, obj: m})
		}
	}
	probed := map[string]bool{}
	leafTypes := map[reflect.Type]bool{}
	for _, k := range apigen.Kinds {
		for _, path := range leafPaths(k.Type) {
			leafTypes[typeAt(k.Type, path)] = true
			for _, v := range leafProbes {
				obj := map[string]any{"apiVersion": k.APIVersion, "kind": k.Type.Name(), "metadata": map[string]any{"name": "probe"}}
				setPath(obj, path, v)
				check(&Document{File: "probe", APIVersion: k.APIVersion, Kind: k.Type.Name(), Name: "probe", obj: obj})
			}
			probed[fmt.Sprint(path)] = true
		}
	}
	t.Logf("%d documents (%d distinct typed), %d decodes compared: %d rejected, %d with unknown fields; %d paths to %d leaf types probed",
		len(docs), typed, checked, rejected, unknown, len(probed), len(leafTypes))
	if typed < 40 || rejected < checked/3 || unknown < 100 || len(leafTypes) != len(apigen.Leaves) {
		t.Errorf("corpus too small to mean anything")
	}
}

// leafPairs are the upstream types that decode JSON themselves, each with its mirror.
var leafPairs = []struct {
	upstream, mirror func() json.Unmarshaler
}{
	{func() json.Unmarshaler { return &metav1.Time{} }, func() json.Unmarshaler { return &apimirror.Metav1_Time{} }},
	{func() json.Unmarshaler { return &metav1.Duration{} }, func() json.Unmarshaler { return &apimirror.Metav1_Duration{} }},
	{func() json.Unmarshaler { return &metav1.FieldsV1{} }, func() json.Unmarshaler { return &apimirror.Metav1_FieldsV1{} }},
	{func() json.Unmarshaler { return &intstr.IntOrString{} }, func() json.Unmarshaler { return &apimirror.Intstr_IntOrString{} }},
	{func() json.Unmarshaler { return &resource.Quantity{} }, func() json.Unmarshaler { return &apimirror.Resource_Quantity{} }},
	{func() json.Unmarshaler { return &apiextensionsv1.JSON{} }, func() json.Unmarshaler { return &apimirror.Apiextv1_JSON{} }},
	{func() json.Unmarshaler { return &kubeadmv1beta1.BootstrapTokenString{} }, func() json.Unmarshaler { return &apimirror.Kubeadmv1beta1_BootstrapTokenString{} }},
	{func() json.Unmarshaler { return &kubeadmv1beta2.BootstrapTokenString{} }, func() json.Unmarshaler { return &apimirror.Kubeadmv1beta2_BootstrapTokenString{} }},
}

// hugeExponent: resource.ParseQuantity rounds 1e-99999 by computing 10^99999 (upstream's cost,
// which the mirror does not share); the fuzzer need not wait for it.
var hugeExponent = regexp.MustCompile(`[eE][-+]?0*[0-9]{4}`)

// FuzzMirrorLeaves: on any JSON value, each hand-written leaf accepts, rejects and words its
// error as the upstream type's UnmarshalJSON does.
func FuzzMirrorLeaves(f *testing.F) {
	if len(leafPairs) != len(apigen.Leaves) {
		f.Fatalf("%d leaf pairs for %d leaves", len(leafPairs), len(apigen.Leaves))
	}
	for _, p := range leafPairs {
		if q := apigen.Qualified(reflect.TypeOf(p.upstream()).Elem()); !apigen.Leaves[q] {
			f.Fatalf("%s is not in apigen.Leaves", q)
		}
	}
	for _, v := range leafProbes {
		b, _ := json.Marshal(v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Trim(data, " \t\r\n") // encoding/json hands over the value alone
		if !json.Valid(data) || len(data) > 256 || hugeExponent.Match(data) {
			return
		}
		for _, p := range leafPairs {
			u, m := p.upstream(), p.mirror()
			if ue, me := errText(u.UnmarshalJSON(data)), errText(m.UnmarshalJSON(data)); ue != me {
				t.Errorf("%T on %q: upstream %s, mirror %s", u, data, ue, me)
			}
		}
	})
}
