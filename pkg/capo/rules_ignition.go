package capo

import (
	"fmt"
	"slices"
	"strings"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"gopkg.in/yaml.v3"
)

// additionalConfigLimit is CAPI v1.14's MaxLength of containerLinuxConfig.additionalConfig.
const additionalConfigLimit = 32768

// checkIgnitionSpec runs the rules for a KubeadmConfigSpec with format: ignition.
func (l *linter) checkIgnitionSpec(b *bootstrapSpec) []Finding {
	d := b.doc
	var out []Finding
	add := func(rule string, path Path, format string, a ...any) {
		out = append(out, newFinding(d, rule, b.path.Child(path...), fmt.Sprintf(format, a...)))
	}
	if v, _ := b.spec["useExperimentalRetryJoin"].(bool); v {
		add(ruleRetryJoin, Path{"useExperimentalRetryJoin"}, "useExperimentalRetryJoin: true is not supported with format: ignition")
	}
	for i, f := range getList(b.spec, "files") {
		enc, path := getString(f, "encoding"), getString(f, "path")
		switch {
		case enc == "gzip" || enc == "gzip+base64":
			add(ruleGzip, Path{"files", i, "encoding"}, "file %s uses encoding %s, which Ignition bootstrap data does not support", path, enc)
		case enc == "base64" && !l.capi.base64FilesDecoded():
			add(ruleBase64OldCAPI, Path{"files", i, "encoding"}, "file %s is base64-encoded: CAPI %s writes it to disk still encoded (decoded from 1.2.0)", path, l.capi)
		}
		if getString(f, "permissions") == "" {
			add(ruleCABPKRender, Path{"files", i}, "file %s has no permissions: CABPK's Ignition renderer reads the Container Linux Config it makes of files[] strictly, and the transpiler's %q is an error there, so CABPK writes no bootstrap data and the Machine never boots", path, "mode unspecified for file, defaulting to 0644")
		}
	}

	// additionalConfig: the transpiler's verdict, then what the node's units need.
	acPath := Path{"ignition", "containerLinuxConfig", "additionalConfig"}
	src, hasAC := b.additionalConfig()
	var additional *igntypes.Config
	if hasAC && len(src) > additionalConfigLimit {
		add(ruleAdditionalSize, acPath, "additionalConfig is %d bytes, over CAPI's limit of %d", len(src), additionalConfigLimit)
	}
	if hasAC {
		// References without a default are checked with a sample value of their shape.
		res := l.transpile(withSampleValues(src))
		node, _ := d.walk(b.path.Child(acPath...))
		// A line of additionalConfig maps exactly to a line of the file for block scalars (| or
		// >), whose content starts on the line after the indicator.
		exact := node != nil && node.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
		strict, _ := get(b.spec, "ignition", "containerLinuxConfig", "strict")
		lines := strings.Split(src, "\n")
		for _, is := range res.Issues {
			rule, msg := ruleCLCInvalid, "additionalConfig: "+is.String()
			line := ""
			if is.Line >= 1 && is.Line <= len(lines) {
				line = lines[is.Line-1]
			}
			_, unresolved, _ := resolveDefaults(line)
			switch {
			case is.Severity == "error" && len(unresolved) > 0:
				// A sample value of the wrong type, not the value the node gets.
				rule, msg = ruleCLCWarning, fmt.Sprintf("%s; the value comes from %s, which has no default: lint cannot check it", msg, strings.Join(unresolved, ", "))
			case is.Severity != "error" && strict == true:
				msg += " (strict: true: CABPK refuses the config)"
			case is.Severity != "error":
				rule = ruleCLCWarning // CABPK logs it and keeps the config
				if strings.Contains(is.Message, "unrecognized key") {
					msg += " (CABPK keeps the config without this key: what it sets never reaches the node)"
				}
			}
			f := newFinding(d, rule, b.path.Child(acPath...), msg)
			if is.Line > 0 && exact {
				f.Line = node.Line + is.Line
			}
			out = append(out, f)
		}
		if !res.Fatal {
			additional = &res.Ignition
		}
	}
	if additional != nil || !hasAC {
		units := unitSettings{}
		if additional != nil {
			for _, u := range additional.Systemd.Units {
				if u.Name == "kubeadm.service" {
					units.parse(u.Contents)
					for _, dr := range u.Dropins {
						units.parse(dr.Contents)
					}
				}
			}
		}
		if !units.has("After", "containerd.service") {
			add(ruleKubeadmOrdering, acPath, "no kubeadm.service unit or drop-in in additionalConfig has After=containerd.service%s", units.found("After"))
		}
		if !units.has("EnvironmentFile", "/run/metadata/flatcar") {
			add(ruleEnvironmentFile, acPath, "no kubeadm.service unit or drop-in in additionalConfig has EnvironmentFile=/run/metadata/flatcar%s", units.found("EnvironmentFile"))
		}
		size, _, err := estimateUserData(b, additional)
		switch {
		case err != nil:
			add(ruleCABPKRender, nil, "CABPK's Ignition renderer refuses this bootstrap config, so the Machine never gets its user-data: %v", err)
		case size > userDataLimit:
			add(ruleUserDataSize, nil, "estimated user-data is %d bytes after base64, over Nova's limit of %d", size, userDataLimit)
		}
	}

	// Node identity from coreos-metadata.
	usesMetadata := false
	for _, c := range b.registrationConfigs() {
		reg := getMap(b.spec, c, "nodeRegistration")
		name := getString(reg, "name")
		switch {
		case strings.Contains(name, "{COREOS_OPENSTACK_HOSTNAME"):
			usesMetadata = true
		case name == "":
			add(ruleNodeName, Path{c, "nodeRegistration", "name"}, "%s.nodeRegistration.name is not set; set it from coreos-metadata", c)
		default:
			add(ruleNodeName, Path{c, "nodeRegistration", "name"}, "%s.nodeRegistration.name is %q, not from coreos-metadata", c, name)
		}
		id, idx, ok := kubeletArg(reg, "provider-id")
		argPath := Path{c, "nodeRegistration", "kubeletExtraArgs"}
		if ok {
			if idx >= 0 {
				argPath = argPath.Child(idx, "value")
			} else {
				argPath = argPath.Child("provider-id")
			}
		}
		switch {
		case ok && (id == "openstack:///${COREOS_OPENSTACK_INSTANCE_UUID}" || id == "openstack:///$${COREOS_OPENSTACK_INSTANCE_UUID}"):
			usesMetadata = true
		case ok:
			add(ruleProviderID, argPath, "provider-id is %q, not openstack:///${COREOS_OPENSTACK_INSTANCE_UUID}", id)
		default:
			add(ruleProviderID, argPath, "%s sets no kubelet provider-id", c)
		}
	}
	if usesMetadata && !b.runsEnvsubst() {
		add(ruleEnvsubst, Path{"preKubeadmCommands"}, "the kubeadm configuration references ${COREOS_OPENSTACK_*} but no preKubeadmCommand runs envsubst on /etc/kubeadm.yml")
	}
	return out
}

// unitSettings collects the [Unit]/[Service] assignments of kubeadm.service from its contents
// and drop-ins, key -> values (space-separated lists split).
type unitSettings map[string][]string

func (s unitSettings) parse(contents string) {
	for _, line := range strings.Split(contents, "\n") {
		line = strings.TrimSpace(line)
		key, value, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		key = strings.TrimSpace(key)
		for _, v := range strings.Fields(value) {
			s[key] = append(s[key], strings.TrimPrefix(v, "-")) // "-" marks an optional EnvironmentFile
		}
	}
}

func (s unitSettings) has(key, value string) bool { return slices.Contains(s[key], value) }

// found describes what the unit has instead, for the message.
func (s unitSettings) found(key string) string {
	if len(s[key]) == 0 {
		return ""
	}
	return fmt.Sprintf(" (it has %s=%s)", key, strings.Join(s[key], " "))
}
