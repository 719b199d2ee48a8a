package cli_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// stringLeaves counts, over every document of a manifest, the string values found at each
// field name (the map key, or the key of the list holding it).
func stringLeaves(t *testing.T, manifest []byte) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(k, c)
			}
		case []any:
			for _, c := range x {
				walk(key, c)
			}
		default:
			out[key] = append(out[key], x)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the manifest is not YAML: %v", err)
		}
		walk("", doc)
	}
}

// Every value manifests puts into the YAML reads back as given: YAML special forms (null, ~, a
// quoted or anchored text, a comment, surrounding spaces, a mapping, a flow list, a number, a
// boolean) used to be written raw, and the manifest passed validation naming another image (or
// none). Each value is given through --image-name and --set, rendered, the output parsed and
// compared, in the plain template and the ClusterClass. A value that cannot be quoted (inside a
// longer value) or breaks a rule of its own is refused, naming the flag that gave it.
func TestManifestsValuesRoundTrip(t *testing.T) {
	testutil.Slow(t, "17 hostile values through 4 flags: ~60 manifests runs, ~40 s")
	dir := t.TempDir()
	out := filepath.Join(dir, "m.yaml")
	hostile := []string{"null", "~", "'q'", "&a x", "img #2", " lead", "trail ", "a: b", "[x]", `"dq"`, "123", "true", "x\ny", "*a", "- x", "{}", ""}
	for _, v := range hostile {
		for _, c := range []struct {
			args  []string
			field string
			n     int
		}{
			{[]string{"--image-name", v}, "name", 2}, // the two OpenStackMachineTemplates' image filters
			{[]string{"--set", "OPENSTACK_SSH_KEY_NAME=" + v}, "sshKeyName", 2},
			{[]string{"--set", "OPENSTACK_DNS_NAMESERVERS=" + v}, "dnsNameservers", 1},
			{[]string{"--clusterclass", "--image-name", v}, "value", 1}, // the Cluster's imageName variable
		} {
			if v == "" && c.args[0] == "--image-name" || v == "" && c.args[0] == "--clusterclass" {
				continue // an empty --image-name is refused
			}
			args := append([]string{"manifests", "--output-file", out}, c.args...)
			testutil.Run(t, args...).MustSucceed(t)
			manifest, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, got := range stringLeaves(t, manifest)[c.field] {
				if got == v {
					n++
				}
			}
			if n < c.n {
				t.Errorf("%q: %d %s fields read back as the value, want %d; got %v", c.args, n, c.field, c.n, stringLeaves(t, manifest)[c.field])
			}
		}
	}
	for _, bad := range []struct {
		args []string
		want []string
	}{
		{[]string{"--cluster-name", "bad name"}, []string{"--cluster-name", "RFC 1123", "lower-case letters"}},
		{[]string{"--cluster-name", "Demo"}, []string{"--cluster-name", "RFC 1123"}},
		{[]string{"--set", "CLUSTER_NAME=null"}, nil}, // a valid name, quoted where needed
		{[]string{"--set", "CLUSTER_NAME=a_b"}, []string{"--set CLUSTER_NAME", "RFC 1123"}},
		{[]string{"--set", "WORKER_MACHINE_COUNT=0x10"}, []string{"--set WORKER_MACHINE_COUNT", "whole number"}},
		{[]string{"--flavor", "sysext", "--kubernetes-version", "v1.33.4", "--insecure-no-hash", "--set", "KUBERNETES_SYSEXT_URL=http://mirror.example/a #b"},
			[]string{"--set KUBERNETES_SYSEXT_URL", "cannot be quoted"}},
		{[]string{"--image-ref", "orc", "--image-name", "img #2"}, []string{"--image-name", "ORC Image", "RFC 1123"}},
	} {
		os.Remove(out)
		args := append([]string{"manifests", "--output-file", out}, bad.args...)
		if bad.want == nil {
			testutil.Run(t, args...).MustSucceed(t)
			continue
		}
		r := testutil.Run(t, args...).MustFail(t, 2, bad.want...)
		if strings.Contains(r.Stderr, "--set") && !slices.Contains(bad.args, "--set") {
			t.Errorf("%q: the message blames --set:\n%s", bad.args, r.Stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: wrote %s", bad.args, out)
		}
	}
}
