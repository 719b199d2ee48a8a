package capo

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/templates"
)

// Flavors of the cluster template: where the nodes' Kubernetes comes from.
const (
	// FlavorBaked: an image built with Kubernetes installed (build --method packer). Default.
	FlavorBaked = "baked"
	// FlavorSysextBaked: an image carrying the Kubernetes sysext (build --method sysext);
	// nothing is downloaded at boot.
	FlavorSysextBaked = "sysext-baked"
	// FlavorSysext: Flatcar's stock image; Ignition downloads the Kubernetes sysext at first
	// boot (CAPO's flatcar-sysext flavor), from KUBERNETES_SYSEXT_URL.
	FlavorSysext = "sysext"
)

// flavor describes one flavor for help texts and reports.
type flavor struct {
	Name    string `json:"name"`
	Image   string `json:"image"`
	Summary string `json:"summary"`
}

// flavors lists the flavors, default first.
var flavors = []flavor{
	{FlavorBaked, "built by 'build' (--method packer): Kubernetes installed in the image",
		"kubeadm.service ordered after containerd and coreos-metadata"},
	{FlavorSysextBaked, "built by 'build --method sysext': the Kubernetes sysext inside the image",
		"no download at boot; update-engine and locksmithd masked so that nodes do not reboot on their own"},
	{FlavorSysext, "Flatcar's stock OpenStack image",
		"Ignition downloads kubernetes-${KUBERNETES_VERSION}-<arch>.raw (x86-64, or arm64 from --arch, --sysext or --from-record) at first boot from " + VarSysextURL + " (default " + DefaultSysextURL + ") and links it as /etc/extensions/kubernetes.raw; update-engine and locksmithd masked"},
}

// VarSysextURL is the sysext flavor's variable: the directory URL serving
// kubernetes-<version>-<arch>.raw (a local mirror for clouds without internet access).
const (
	VarSysextURL     = "KUBERNETES_SYSEXT_URL"
	DefaultSysextURL = "https://extensions.flatcar.org/extensions"
	// VarSysextSHA512 is the sysext's sha512 (hex): Ignition checks the download against it.
	VarSysextSHA512 = "KUBERNETES_SYSEXT_SHA512"
)

// FlavorNames lists the flavor names, for flag help.
func FlavorNames() []string {
	n := make([]string, len(flavors))
	for i, f := range flavors {
		n[i] = f.Name
	}
	return n
}

// flavorHeaders are the lines a flavor adds to the base template's header comment.
var flavorHeaders = map[string][]string{
	FlavorSysextBaked: {
		"Flavor sysext-baked: for an image made by 'flatcar-capo build --method sysext', which carries the",
		"Kubernetes sysext (/etc/extensions/kubernetes.raw): nothing is downloaded at boot. update-engine and",
		"locksmithd are masked so that nodes do not update and reboot on their own.",
	},
	FlavorSysext: {
		"Flavor sysext (CAPO's flatcar-sysext): for Flatcar's stock OpenStack image. Ignition downloads",
		"kubernetes-${KUBERNETES_VERSION}-<arch>.raw from KUBERNETES_SYSEXT_URL at first boot (make one with",
		"'flatcar-capo sysext create' for a mirror) and links it as /etc/extensions/kubernetes.raw.",
	},
}

// flavorTemplate returns the cluster template of a flavor for a CAPI API version: the one base
// template of that API version (templates/cluster-template-flatcar*.yaml) with the flavor's
// additionalConfig (templates/clc/<flavor>.yaml, changed by edit when not nil) in both bootstrap
// configs. Nothing else differs between flavors, so nothing is kept twice.
func flavorTemplate(flavor, capiAPI string, clusterClass bool, edit func(string) (string, error)) ([]byte, error) {
	name, err := templateFile(flavor, capiAPI, clusterClass)
	if err != nil {
		return nil, err
	}
	base, err := templates.FS.ReadFile(name)
	if err != nil || (flavor == "" || flavor == FlavorBaked) && edit == nil {
		return base, err
	}
	flavor = cmp.Or(flavor, FlavorBaked)
	clc, err := templates.FS.ReadFile("clc/" + flavor + ".yaml")
	if err != nil {
		return nil, err
	}
	text := string(clc)
	if edit != nil {
		if text, err = edit(text); err != nil {
			return nil, err
		}
	}
	return withAdditionalConfig(base, text, flavorHeaders[flavor])
}

// templateFile is the base template of capiAPI, after checking the flavor's name.
func templateFile(flavor, capiAPI string, clusterClass bool) (string, error) {
	name := "cluster-template-flatcar"
	switch flavor {
	case "", FlavorBaked, FlavorSysextBaked, FlavorSysext:
	default:
		return "", fmt.Errorf("unknown flavor %q: use %s", flavor, strings.Join(FlavorNames(), ", "))
	}
	if clusterClass {
		switch {
		case flavor == FlavorSysext:
			return "", fmt.Errorf("--clusterclass with --flavor sysext: that flavor downloads a file named for one Kubernetes version, and a ClusterClass leaves the version to each Cluster (topology.version); use --flavor baked or sysext-baked (the sysext in the image)")
		case capiAPI == CAPIv1beta1:
			return "", fmt.Errorf("--clusterclass renders CAPI v1beta2 (ClusterClass with templateRef, CAPI 1.11+); drop --capi-api v1beta1")
		}
		return "clusterclass-flatcar-v1beta2.yaml", nil
	}
	switch capiAPI {
	case "", CAPIv1beta2:
		name += "-v1beta2"
	case CAPIv1beta1:
	default:
		return "", fmt.Errorf("unknown CAPI API version %q: use %s (CAPI 1.11+, the default) or %s (older CAPI)", capiAPI, CAPIv1beta2, CAPIv1beta1)
	}
	return name + ".yaml", nil
}

// withAdditionalConfig returns the baked template tmpl with every additionalConfig block
// replaced by clc (indented to fit) and flavor lines added after the first header line.
func withAdditionalConfig(tmpl []byte, clc string, header []string) ([]byte, error) {
	lines := strings.SplitAfter(string(tmpl), "\n")
	var out []string
	replaced := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		out = append(out, l)
		if i == 0 {
			for _, h := range header {
				out = append(out, "# "+h+"\n")
			}
		}
		key := strings.TrimLeft(l, " ")
		if key != "additionalConfig: |\n" {
			continue
		}
		indent := len(l) - len(key)
		// Skip the old block: blank lines and lines indented deeper than the key.
		j := i + 1
		for ; j < len(lines); j++ {
			t := strings.TrimRight(lines[j], "\n")
			if strings.TrimSpace(t) != "" && len(t)-len(strings.TrimLeft(t, " ")) <= indent {
				break
			}
		}
		out = append(out, indentBlock(clc, strings.Repeat(" ", indent+2)))
		i = j - 1
		replaced++
	}
	if replaced != 2 {
		return nil, fmt.Errorf("found %d additionalConfig blocks in the baked template, want 2", replaced)
	}
	return []byte(strings.Join(out, "")), nil
}

// indentBlock indents every line of text but the blank ones by pad, as the content of a YAML
// block scalar, and ends it with one newline.
func indentBlock(text, pad string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimRight(text, "\n")+"\n", "\n") {
		if l != "" && l != "\n" {
			b.WriteString(pad)
		}
		b.WriteString(l)
	}
	return b.String()
}
