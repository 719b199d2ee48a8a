package capo

import (
	"reflect"
	"strings"
	"testing"
)

func TestSubstitute(t *testing.T) {
	tests := []struct {
		name, tmpl string
		values     map[string]string
		want       string
		missing    []string
	}{
		{"filled", "a: ${A}\nb: $B\n", map[string]string{"A": "1", "B": "2"}, "a: 1\nb: 2\n", nil},
		{"escape unescaped when complete", "n: $${COREOS_X}\nv: ${A}", map[string]string{"A": "1"}, "n: ${COREOS_X}\nv: 1", nil},
		{"escape kept while incomplete", "n: $${COREOS_X%.*}\nv: ${A}\nw: ${B}", map[string]string{"A": "1"},
			"n: $${COREOS_X%.*}\nv: 1\nw: ${B}", []string{"B"}},
		{"defaults", "${A:=x} ${B:-y} ${C=z} ${D-w}", map[string]string{"A": "", "C": ""}, "x y  w", nil},
		{"empty value kept without colon", "[${A}]", map[string]string{"A": ""}, "[]", nil},
		{"missing sorted unique", "${B} ${A} ${B}", nil, "${B} ${A} ${B}", []string{"A", "B"}},
		{"lone dollars are text", `echo "$?" $1 $ end$`, nil, `echo "$?" $1 $ end$`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing, err := Substitute([]byte(tt.tmpl), tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want || !reflect.DeepEqual(missing, tt.missing) {
				t.Fatalf("Substitute(%q) = %q, missing %v; want %q, missing %v", tt.tmpl, got, missing, tt.want, tt.missing)
			}
		})
	}
}

func TestSubstituteErrors(t *testing.T) {
	for _, tmpl := range []string{"${A", "${1A}", "${A%.*}", "${}"} {
		if _, _, err := Substitute([]byte(tmpl), nil); err == nil {
			t.Errorf("Substitute(%q) accepted an expression clusterctl templates must escape", tmpl)
		}
	}
}

func TestVariables(t *testing.T) {
	got, err := Variables([]byte("x: ${B}\ny: $${NODE}\nz: ${A:=d} $C $$D"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A", "B", "C"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Variables = %v, want %v", got, want)
	}
}

// FuzzSubstitute: never panics, and a complete substitution leaves no variable reference.
func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"${A}", "$${A}", "${A:=b}", "$A$", "$$$", "${A%.*}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		vars, err := Variables([]byte(tmpl))
		if err != nil {
			return
		}
		values := map[string]string{}
		for _, v := range vars {
			values[v] = "v"
		}
		out, missing, err := Substitute([]byte(tmpl), values)
		if err != nil || len(missing) > 0 {
			t.Fatalf("Substitute(%q) with every variable set: missing %v, err %v", tmpl, missing, err)
		}
		if strings.Count(string(out), "$") > strings.Count(tmpl, "$") {
			t.Fatalf("Substitute(%q) = %q added dollars", tmpl, out)
		}
	})
}
