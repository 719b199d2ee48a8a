// Package apimirror holds pkg/capo's mirror of the upstream Cluster API, CAPO, ORC and Kubernetes
// API types: zz_generated.go (written by ../apigen from the versions go.mod pins) and the
// hand-written leaves.go. Decoding into a mirror type accepts and rejects what decoding into the
// upstream type does; this file makes its errors name the upstream types, too.
//
// The mirror replaces the upstream types for a whole-command reason (docs/architecture.md,
// "Hand-written codecs"): linking them costs every command their package inits at start. 20
// `flatcar-capo version` took 0.26 s wall, 0.18 s CPU and 14 MiB with the mirror (the tree at
// f951c05) against 0.59 s, 0.42 s and 39 MiB with the upstream types (f951c05^) in the same run,
// 2.33x the CPU (2026-12-02, load ~6.5; scripts/bench/codecs.sh apimirror). `lint` of 1,000
// documents alone gains 1.06x CPU and 1.30x wall. Re-measure when the mirror or go.mod's API
// versions change.
package apimirror

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

var pkgPath = reflect.TypeFor[Metav1_Time]().PkgPath()

// UpstreamName is the upstream name of a mirror type or embedded field ("Metav1_ObjectMeta" ->
// "ObjectMeta"); other names are returned unchanged.
func UpstreamName(name string) string {
	prefix, rest, ok := strings.Cut(name, "_")
	if _, known := packageName(prefix); ok && known {
		return rest
	}
	return name
}

// UpstreamString is t.String() as the upstream type prints: "[]v1beta1.File" for
// []Kubeadmv1beta1_File.
func UpstreamString(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() != pkgPath {
			return t.String()
		}
		prefix, rest, _ := strings.Cut(t.Name(), "_")
		if pkg, ok := packageName(prefix); ok {
			return pkg + "." + rest
		}
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + UpstreamString(t.Elem())
	case reflect.Slice:
		return "[]" + UpstreamString(t.Elem())
	case reflect.Array:
		return "[" + strconv.Itoa(t.Len()) + "]" + UpstreamString(t.Elem())
	case reflect.Map:
		return "map[" + UpstreamString(t.Key()) + "]" + UpstreamString(t.Elem())
	}
	return t.String()
}

// typeError is a json.UnmarshalTypeError worded with the upstream names.
type typeError struct {
	msg string
	err *json.UnmarshalTypeError
}

func (e *typeError) Error() string { return e.msg }
func (e *typeError) Unwrap() error { return e.err }

// UpstreamError words encoding/json's type errors as decoding into the upstream types does
// (struct, embedded field and type names); other errors name no Go type and are returned as they are.
func UpstreamError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return err
	}
	typ := UpstreamString(te.Type)
	if te.Struct == "" && te.Field == "" {
		return &typeError{"json: cannot unmarshal " + te.Value + " into Go value of type " + typ, te}
	}
	field := strings.Split(te.Field, ".")
	for i, f := range field {
		field[i] = UpstreamName(f)
	}
	return &typeError{"json: cannot unmarshal " + te.Value + " into Go struct field " + UpstreamName(te.Struct) + "." +
		strings.Join(field, ".") + " of type " + typ, te}
}
