package node

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// files are the node files this package defines; dirs the directories whose entries are free
// (binaries, plugins, sysext images and links). A node path anything else writes is drift.
var (
	files = []string{kubeletUnit, kubeletDropIn, containerdConfig, containerdDropIn, KubeadmDropIn,
		kubeadmContainerdDropIn, SysextKubeletUnit, SysextKubeletDropIn, SysextUpholds, UnitDir,
		ImagesArchive, ImagesList, ImportScript, ImportUnit,
		ImportWants, ContainerdConfDropIn, ContainerdAuthDropIn}
	dirs = []string{BinDir, CNIBinDir, ExtensionsStore, ExtensionsDir, SysextBinDir, SysextCNIDir,
		VolumePluginDir, PreloadDir, path.Dir(path.Dir(ImportScript)),
		ContainerdCertsDir, KubeadmRetryDir}
)

func init() {
	for _, u := range UpdateUnits {
		files = append(files, path.Join(UnitDir, u))
	}
	files = append(files, ImagesNames, ProxyEnvFile, RegistryCA, ImagesDropIn(Kubelet), ImagesDropIn(Kubeadm),
		ProxyDropIn(Containerd), ProxyDropIn(Kubelet))
}

// ours are the places flatcar-capo decides (not kubeadm's /etc/kubernetes, not the OS's own).
var ours = regexp.MustCompile(`(?:^|[\s"'=(:>;,])(/(?:opt|etc/systemd|usr/lib/systemd|etc/extensions|etc/containerd|usr/local/bin|var/lib/flatcar-capo)(?:/[A-Za-z0-9_.@${}-]*)*)`)

// undefined lists the node paths in text that the definition does not have.
func undefined(text string) []string {
	var bad []string
	for _, m := range ours.FindAllStringSubmatch(text, -1) {
		p := strings.TrimSuffix(m[1], ".")
		if !defined(p) {
			bad = append(bad, p)
		}
	}
	return bad
}

func defined(p string) bool {
	clean := strings.TrimSuffix(p, "/")
	for _, f := range files {
		if clean == f || strings.HasPrefix(f, clean+"/") {
			return true
		}
	}
	for _, d := range dirs {
		d = strings.TrimSuffix(d, "/")
		if clean == d || strings.HasPrefix(clean, d+"/") || strings.HasPrefix(d, clean+"/") {
			return true
		}
	}
	return false
}

func TestUndefinedPathsAreFound(t *testing.T) {
	for text, want := range map[string]string{
		`install -m 0755 kubelet /opt/bin/kubelet`:                      "",
		`cat >/etc/systemd/system/kubelet.service <<UNIT`:               "",
		`cat >/etc/systemd/system/kubelet.service.d/20-other.conf`:      "/etc/systemd/system/kubelet.service.d/20-other.conf",
		`tar -C /opt/cni/bin; cp x /opt/kubernetes/bin/x`:               "/opt/kubernetes/bin/x",
		`- path: /opt/extensions/kubernetes/kubernetes-${V}-x86-64.raw`: "",
		`ExecStart=/usr/bin/kubelet`:                                    "",
		`mask /etc/systemd/system/other.service`:                        "/etc/systemd/system/other.service",
	} {
		if got := strings.Join(undefined(text), " "); got != want {
			t.Errorf("%q: undefined %q, want %q", text, got, want)
		}
	}
}

// sources are the files outside Go that put things on a node.
func sources(t *testing.T) []string {
	var out []string
	for _, g := range []string{"../../packer/scripts/*.sh", "../../packer/*.tmpl", "../sysext/units/*",
		"../../templates/*.yaml", "../../templates/clc/*.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v (no files)", g, err)
		}
		out = append(out, m...)
	}
	return out
}

// TestScriptsAndTemplatesUseTheDefinition: every node path in the Packer scripts, the sysext's
// units and the CAPO templates is one this package defines.
func TestScriptsAndTemplatesUseTheDefinition(t *testing.T) {
	for _, f := range sources(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range undefined(string(b)) {
			t.Errorf("%s uses %s, which pkg/node does not define: add it there (and pass it as a NODE_* variable to scripts)", f, p)
		}
	}
}

// TestScriptsGetTheirPathsFromEnv: the Packer scripts repeat none of Env's values; each reads
// the variable instead.
func TestScriptsGetTheirPathsFromEnv(t *testing.T) {
	scripts, _ := filepath.Glob("../../packer/scripts/*.sh")
	env := Env()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	used := map[string]bool{}
	for _, f := range scripts {
		b, _ := os.ReadFile(f)
		text := string(b)
		for _, k := range keys {
			if strings.Contains(text, "$"+k) || strings.Contains(text, "${"+k) {
				used[k] = true
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, env[k]) && !strings.HasPrefix(strings.TrimSpace(line), "#") && !strings.Contains(line, env[k]+"/") {
					t.Errorf("%s repeats %s (%s): use $%s", f, env[k], strings.TrimSpace(line), k)
				}
			}
		}
	}
	for _, f := range scripts {
		b, _ := os.ReadFile(f)
		for _, m := range regexp.MustCompile(`\bNODE_[A-Z_]+`).FindAllString(string(b), -1) {
			if _, ok := env[m]; !ok {
				t.Errorf("%s reads %s, which Env does not set", f, m)
			}
		}
	}
	for _, k := range keys {
		if !used[k] {
			t.Errorf("no Packer script reads %s: drop it from Env or use it", k)
		}
	}
}

// clc is the part of a Container Linux Config the templates' node settings use.
type clc struct {
	Systemd struct {
		Units []struct {
			Name    string `yaml:"name"`
			Mask    bool   `yaml:"mask"`
			Dropins []struct {
				Name     string `yaml:"name"`
				Contents string `yaml:"contents"`
			} `yaml:"dropins"`
		} `yaml:"units"`
	} `yaml:"systemd"`
}

// additionalConfigs finds every additionalConfig string in a YAML tree (the base templates
// carry the baked flavor's inline).
func additionalConfigs(n *yaml.Node, out *[]string) {
	for i := 0; i+1 < len(n.Content); i++ {
		if n.Kind == yaml.MappingNode && i%2 == 0 && n.Content[i].Value == "additionalConfig" && n.Content[i+1].Kind == yaml.ScalarNode {
			*out = append(*out, n.Content[i+1].Value)
		}
	}
	for _, c := range n.Content {
		additionalConfigs(c, out)
	}
}

// TestTemplatesCarryTheDefinedUnits: the templates' kubeadm drop-in is KubeadmDropIn with
// KubeadmDropInContent, and what they mask is UpdateUnits.
func TestTemplatesCarryTheDefinedUnits(t *testing.T) {
	bases, _ := filepath.Glob("../../templates/*.yaml")
	flavors, _ := filepath.Glob("../../templates/clc/*.yaml")
	for _, f := range append(bases, flavors...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs := []string{string(b)}
		if strings.HasPrefix(filepath.Base(f), "cluster-template") || strings.HasPrefix(filepath.Base(f), "clusterclass") {
			configs = nil
			dec := yaml.NewDecoder(strings.NewReader(string(b)))
			for {
				var doc yaml.Node
				if dec.Decode(&doc) != nil {
					break
				}
				additionalConfigs(&doc, &configs)
			}
			if len(configs) == 0 {
				t.Fatalf("%s: no additionalConfig", f)
			}
		}
		for _, text := range configs {
			var c clc
			if err := yaml.Unmarshal([]byte(text), &c); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var masked []string
			dropIn, timerMasked := false, false
			for _, u := range c.Systemd.Units {
				switch {
				case u.Mask && u.Name == sysupdateTimer:
					timerMasked = true
				case u.Mask:
					masked = append(masked, u.Name)
				}
				for _, d := range u.Dropins {
					p := path.Join(UnitDir, u.Name+".d", d.Name)
					if p != KubeadmDropIn {
						t.Errorf("%s: drop-in %s is not pkg/node's KubeadmDropIn (%s)", f, p, KubeadmDropIn)
						continue
					}
					dropIn = true
					if d.Contents != KubeadmDropInContent {
						t.Errorf("%s: %s is\n%s\nwant pkg/node's KubeadmDropInContent\n%s", f, p, d.Contents, KubeadmDropInContent)
					}
				}
			}
			if !dropIn {
				t.Errorf("%s: no %s", f, KubeadmDropIn)
			}
			if !timerMasked {
				t.Errorf("%s: %s is not masked", f, sysupdateTimer)
			}
			if masked != nil && strings.Join(masked, " ") != strings.Join(UpdateUnits, " ") {
				t.Errorf("%s masks %v, want pkg/node's UpdateUnits %v", f, masked, UpdateUnits)
			}
		}
	}
}
