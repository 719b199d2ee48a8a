package capo_test

import (
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// Flatcar 4515+ enables systemd-sysupdate.timer, whose service fails with nothing configured:
// every flavor, CAPI API and the ClusterClass, rendered by manifests as a user runs it, masks the
// timer in every bootstrap config; --sysupdate-url unmasks and enables it, with each transfer under
// the names both systemd 255 (.conf) and 257+ (.transfer) read.
func TestEveryFlavorSetsTheSysupdateTimer(t *testing.T) {
	type run struct {
		name string
		args []string
	}
	var runs []run
	for _, flavor := range []string{"baked", "sysext-baked", "sysext"} {
		for _, api := range []string{"v1beta1", "v1beta2"} {
			args := []string{"manifests", "--flavor", flavor, "--capi-api", api, "--kubernetes-version", "v1.34.4"}
			if flavor == "sysext" {
				args = append(args, "--insecure-no-hash", "--sysext-url", "http://10.0.0.5/ext")
			}
			runs = append(runs, run{flavor + "/" + api, args})
		}
		if flavor != "sysext" {
			runs = append(runs, run{flavor + "/clusterclass", []string{"manifests", "--flavor", flavor, "--clusterclass"}})
		}
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			configs := ignitions(t, testutil.Run(t, r.args...).MustSucceed(t).Stdout)
			for _, cfg := range configs {
				if state := timerState(cfg); state != "masked" {
					t.Errorf("systemd-sysupdate.timer is %s, want masked", state)
				}
			}
			if !strings.HasPrefix(r.name, "sysext") || strings.HasSuffix(r.name, "clusterclass") {
				return
			}
			configs = ignitions(t, testutil.Run(t, append(r.args, "--sysupdate-url", "http://10.0.0.5/ext")...).MustSucceed(t).Stdout)
			for _, cfg := range configs {
				if state := timerState(cfg); state != "enabled" {
					t.Errorf("with --sysupdate-url systemd-sysupdate.timer is %s, want enabled", state)
				}
				files := map[string]string{}
				for _, f := range cfg.Storage.Files {
					files[f.Path] = f.Contents.Source
				}
				for _, pair := range [][2]string{
					{"/etc/sysupdate.kubernetes.d/kubernetes-v1.34.transfer", "/etc/sysupdate.kubernetes.d/kubernetes-v1.34.conf"},
					{"/etc/sysupdate.d/noop.transfer", "/etc/sysupdate.d/noop.conf"},
				} {
					if files[pair[0]] == "" || files[pair[0]] != files[pair[1]] {
						t.Errorf("%s and %s: not both installed with the same content (%d, %d bytes)", pair[0], pair[1], len(files[pair[0]]), len(files[pair[1]]))
					}
				}
			}
		})
	}
	testutil.Run(t, "manifests", "--flavor", "baked", "--sysupdate-url", "http://10.0.0.5/ext").MustFail(t, 2, "--flavor sysext or sysext-baked")
}

// timerState is how an Ignition config leaves systemd-sysupdate.timer: masked, enabled, disabled
// or unset (one entry, or "twice").
func timerState(cfg igntypes.Config) string {
	state := "unset"
	for _, u := range cfg.Systemd.Units {
		if u.Name != "systemd-sysupdate.timer" {
			continue
		}
		if state != "unset" {
			return "twice"
		}
		switch {
		case u.Mask:
			state = "masked"
		case u.Enabled != nil && *u.Enabled:
			state = "enabled"
		case u.Enabled != nil:
			state = "disabled"
		}
	}
	return state
}

// ignitions transpiles every additionalConfig of a rendered manifest (bootstrap configs and
// their templates), failing when there are fewer than two.
func ignitions(t *testing.T, manifest string) []igntypes.Config {
	t.Helper()
	var out []igntypes.Config
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		for _, clc := range additionalConfigs(v) {
			res := capo.TranspileCLC(clc)
			if res.Fatal || len(res.Issues) > 0 {
				t.Fatalf("CLC: %v", res.Issues)
			}
			out = append(out, res.Ignition)
		}
	}
	if len(out) < 2 {
		t.Fatalf("%d additionalConfigs in the manifest, want the control plane's and the workers'", len(out))
	}
	return out
}

func additionalConfigs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "additionalConfig" {
				out = append(out, s)
			} else {
				out = append(out, additionalConfigs(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, additionalConfigs(x)...)
		}
	}
	return out
}
