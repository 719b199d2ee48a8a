package capo

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo/internal/apimirror"
)

// Documents decode into mirrors of their upstream Go types (internal/apimirror), generated from
// the CAPI, CAPO, ORC and k8s.io/api versions go.mod pins: linking the upstream packages would
// cost every command ~10 ms of package initialisation. The kinds are listed in internal/apigen.
//
//go:generate go run ./internal/apigen/cmd -o internal/apimirror/zz_generated.go

// typeOf returns the mirror of a document's upstream type, or nil when this tool has none for it.
func typeOf(d *Document) reflect.Type {
	t, _, _ := apimirror.Lookup(d.APIVersion, d.Kind)
	return t
}

// DecodeStrict decodes a document as into its upstream Go type, rejecting unknown fields and
// mistyped values with upstream's errors; the value returned is the mirror type's. It fails for
// documents whose apiVersion/kind this tool does not know.
func DecodeStrict(d *Document) (any, error) {
	t, pkgPath, name := apimirror.Lookup(d.APIVersion, d.Kind)
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
		return nil, fmt.Errorf("%s does not decode into %s.%s: %w", d, pkgPath, name, apimirror.UpstreamError(err))
	}
	return v, nil
}

// UnknownFields lists every field path of d that its upstream type does not have (all of
// them, where a strict decoder stops at the first). Nil when the type is unknown.
func UnknownFields(d *Document) []Path {
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
		if t, _, _ := apimirror.Lookup(g+"/"+v, d.Kind); t != nil {
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
