package capo

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSubstitute(t *testing.T) {
	v := map[string]string{"V": "v1.34.1", "N": "flatcar", "E": ""}
	tests := []struct {
		name, tmpl string
		values     map[string]string
		want       string
		missing    []string
	}{
		{"filled", "a: ${A}\nb: ${B}\n", map[string]string{"A": "1", "B": "2"}, "a: 1\nb: 2\n", nil},
		{"bare dollar name is text, as in envsubst", "b: $B", nil, "b: $B", nil},
		{"escape unescaped when complete", "n: $${COREOS_X}\nv: ${A}", map[string]string{"A": "1"}, "n: ${COREOS_X}\nv: 1", nil},
		{"escape kept while incomplete", "n: $${COREOS_X%.*}\nv: ${A}\nw: ${B}", map[string]string{"A": "1"},
			"n: $${COREOS_X%.*}\nv: 1\nw: ${B}", []string{"B"}},
		// envsubst gives every default operator the default for an unset or empty variable.
		{"defaults", "${A:=x} ${B:-y} ${C=z} ${D:?w} ${F:+u}", map[string]string{"A": "", "C": ""}, "x y z w u", nil},
		{"default kept when set", "${N:=x}", v, "flatcar", nil},
		{"default holding a reference", "${A:=${N}-x}", v, "flatcar-x", nil},
		{"empty value", "[${E}]", v, "[]", nil},
		{"shortest suffix", "kubernetes-${V%.*}.conf", v, "kubernetes-v1.34.conf", nil},
		{"longest suffix", "${V%%.*}", v, "v1", nil},
		{"shortest prefix", "${V#*.}", v, "34.1", nil},
		{"longest prefix", "${V##*.}", v, "1", nil},
		{"replace first", "${V/./-}", v, "v1-34.1", nil},
		{"replace all", "${V//./-}", v, "v1-34-1", nil},
		{"replace prefix", "${V/#v/V}", v, "V1.34.1", nil},
		{"replace suffix", "${V/%1/9}", v, "v1.34.9", nil},
		{"upper first", "${N^}", v, "Flatcar", nil},
		{"upper", "${N^^}", v, "FLATCAR", nil},
		{"lower first", "${A,}", map[string]string{"A": "ABC"}, "aBC", nil},
		{"lower", "${A,,}", map[string]string{"A": "ABC"}, "abc", nil},
		{"offset", "${N:4}", v, "car", nil},
		{"offset and length", "${N:0:4}", v, "flat", nil},
		{"length", "${#N}", v, "7", nil},
		{"operator on a missing variable", "${V%.*} ${M%.*}", v, "v1.34 ${M%.*}", []string{"M"}},
		{"default kept for clusterctl while incomplete", "${U:=x} ${N:=y} ${M}", v, "${U:=x} flatcar ${M}", []string{"M"}},
		{"missing sorted unique", "${B} ${A} ${B}", nil, "${B} ${A} ${B}", []string{"A", "B"}},
		{"lone dollars are text", `echo "$?" $1 $ end$`, nil, `echo "$?" $1 $ end$`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing, err := substitutePlain([]byte(tt.tmpl), tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want || !reflect.DeepEqual(missing, tt.missing) {
				t.Fatalf("substitutePlain(%q) = %q, missing %v; want %q, missing %v", tt.tmpl, got, missing, tt.want, tt.missing)
			}
		})
	}
}

// TestSubstituteErrors: what clusterctl's envsubst refuses is refused, naming the reference.
func TestSubstituteErrors(t *testing.T) {
	for _, tmpl := range []string{"x: ${A", "${}", "${A-default}", "${A+x}", "${A?x}", "${A:=x"} {
		_, _, err := substitutePlain([]byte(tmpl), nil)
		var re *RefError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "${") {
			t.Errorf("substitutePlain(%q) = %v, want a RefError naming the reference", tmpl, err)
		}
	}
}

func TestVariables(t *testing.T) {
	got, err := variables([]byte("x: ${B}\ny: $${NODE}\nz: ${A:=d} $C $$D ${E%.*} ${#F}"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A", "B", "E", "F"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Variables = %v, want %v", got, want)
	}
}

func TestResolveDefaults(t *testing.T) {
	got, unresolved, err := resolveDefaults("mask: ${MASK:=true} v: ${V%.*} n: $${COREOS_X%.*} u: ${U:-a}${U2}")
	if err != nil {
		t.Fatal(err)
	}
	if want := "mask: true v: ${V%.*} n: $${COREOS_X%.*} u: a${U2}"; got != want {
		t.Fatalf("ResolveDefaults = %q, want %q", got, want)
	}
	if want := []string{"${V%.*}", "${U2}"}; !reflect.DeepEqual(unresolved, want) {
		t.Fatalf("unresolved = %v, want %v", unresolved, want)
	}
}

// FuzzSubstitute: never panics, and a complete substitution leaves no variable reference.
func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"${A}", "$${A}", "${A:=b}", "$A$", "$$$", "${A%.*}", "${A:=${B}}", "${A/x/y}", "${#A}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		vars, err := variables([]byte(tmpl))
		if err != nil {
			return
		}
		values := map[string]string{}
		for _, v := range vars {
			values[v] = "v"
		}
		out, missing, err := substitutePlain([]byte(tmpl), values)
		if err != nil || len(missing) > 0 {
			t.Fatalf("substitutePlain(%q) with every variable set: missing %v, err %v", tmpl, missing, err)
		}
		if strings.Count(string(out), "$") > strings.Count(tmpl, "$") {
			t.Fatalf("substitutePlain(%q) = %q added dollars", tmpl, out)
		}
	})
}

func TestIsClusterctlTemplate(t *testing.T) {
	for s, want := range map[string]bool{
		"name: ${CLUSTER_NAME}":                                 true,
		"name: $${COREOS_OPENSTACK_HOSTNAME}":                   true,
		"name: ${COREOS_OPENSTACK_HOSTNAME}\nx: ${COREOS_A%.*}": false, // rendered: the node's references only
		"name: demo": false,
	} {
		if got := isClusterctlTemplate([]byte(s)); got != want {
			t.Errorf("IsClusterctlTemplate(%q) = %v, want %v", s, got, want)
		}
	}
}

// substitutePlain is substitute writing each value as it is (the product writes YAML-safe
// values through substituteYAML; these tests check the reference syntax itself).
func substitutePlain(tmpl []byte, values map[string]string) (out []byte, missing []string, err error) {
	return substitute(tmpl, values, func(_ string, _ varRef, v string) string { return v })
}
