package capo

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

const verificationBlock = `        verification:
          hash:
            function: sha512
            sum: ${` + VarSysextSHA512 + `}
`

// sysextCLC applies the sysext options to a flavor's additionalConfig: no verification.hash with
// insecureNoHash, and systemd-sysupdate's transfer, noop config, timer (enabled in place of the
// flavor's mask) and the kubernetes drop-in
// of CAPO's flatcar-sysext template for sysupdateURL (patch updates of version's minor).
// With keyring (a binary OpenPGP keyring) the transfer says Verify=true and the keyring goes
// where systemd-sysupdate's gpg reads it. arch (x86-64 when empty) names the sysext file.
func sysextCLC(flavor string, insecureNoHash bool, sysupdateURL string, keyring []byte, version, arch string) func(string) (string, error) {
	if !insecureNoHash && sysupdateURL == "" && (arch == "" || arch == defaultSysextArch) {
		return nil
	}
	return func(clc string) (string, error) {
		if arch != "" && arch != defaultSysextArch {
			if flavor != FlavorSysext {
				return "", fmt.Errorf("the sysext architecture is for --flavor sysext (the flavor that downloads the sysext at boot)")
			}
			// The file's path, its URL and the link's target: one name everywhere.
			if n := strings.Count(clc, "-"+defaultSysextArch+".raw"); n != 3 {
				return "", fmt.Errorf("embedded sysext CLC names the sysext %d times, want 3", n)
			}
			clc = strings.ReplaceAll(clc, "-"+defaultSysextArch+".raw", "-"+arch+".raw")
		}
		if insecureNoHash {
			if flavor != FlavorSysext {
				return "", fmt.Errorf("--insecure-no-hash is for --flavor sysext (the only flavor that downloads at boot)")
			}
			if !strings.Contains(clc, verificationBlock) {
				return "", fmt.Errorf("embedded sysext CLC has no verification block")
			}
			clc = strings.Replace(clc, verificationBlock, "", 1)
		}
		if sysupdateURL == "" {
			return clc, nil
		}
		if flavor != FlavorSysext && flavor != FlavorSysextBaked {
			return "", fmt.Errorf("--sysupdate-url is for --flavor sysext or sysext-baked (nodes running the Kubernetes sysext)")
		}
		if sysext.ValidVersion(version) != nil {
			return "", fmt.Errorf("--sysupdate-url needs an exact --kubernetes-version (its minor names the transfer file), not %q", version)
		}
		conf, err := sysext.SysupdateConf(version, sysupdateURL, keyring != nil)
		if err != nil {
			return "", err
		}
		// Both names of each transfer: the node's systemd reads exactly one (sysext.TransferExts),
		// and manifests cannot know whether the image is LTS (255: .conf) or newer (.transfer).
		var files string
		for _, ext := range sysext.TransferExts {
			files += inlineFile("/etc/sysupdate.kubernetes.d/"+sysext.TransferName(version, ext), string(conf)) +
				inlineFile("/etc/sysupdate.d/"+sysext.NoopName(ext), sysext.SysupdateNoop)
		}
		if keyring != nil {
			files += dataFile(sysext.ImportPubring, keyring)
		}
		clc = "storage:\n  files:\n" + files + strings.TrimPrefix(clc, "storage:\n  files:\n")
		if strings.Count(clc, timerMasked) != 1 {
			return "", fmt.Errorf("embedded CLC does not mask systemd-sysupdate.timer once")
		}
		return strings.Replace(clc, timerMasked, sysupdateUnits, 1), nil
	}
}

// timerMasked is every flavor's systemd-sysupdate.timer (templates/clc/*.yaml): Flatcar 4515+
// enables the timer, and with no transfer its service fails every run. A mask holds however the
// image enables it; --sysupdate-url replaces the entry with sysupdateUnits.
const timerMasked = `  - name: systemd-sysupdate.timer
    # Flatcar 4515+ enables it and its service fails with no transfer; manifests --sysupdate-url enables it.
    mask: true
`

// inlineFile is a CLC storage.files entry with content inline.
func inlineFile(path, content string) string {
	return fmt.Sprintf("  - path: %s\n    filesystem: root\n    mode: 0644\n    contents:\n      inline: |\n", path) +
		indentBlock(content, "        ")
}

// dataFile is a CLC storage.files entry whose (binary) content is a base64 data URL.
func dataFile(path string, content []byte) string {
	return fmt.Sprintf("  - path: %s\n    filesystem: root\n    mode: 0644\n    contents:\n      remote:\n        url: \"data:;base64,%s\"\n",
		path, base64.StdEncoding.EncodeToString(content))
}

// sysupdateUnits are CAPO's flatcar-sysext settings: the timer, and a drop-in that updates the
// kubernetes component and asks for a reboot (locksmith/kured) when the image changed.
const sysupdateUnits = `  - name: systemd-sysupdate.timer
    enabled: true
  - name: systemd-sysupdate.service
    dropins:
    - name: kubernetes.conf
      contents: |
        [Service]
        ExecStartPre=/usr/bin/sh -c "readlink --canonicalize /etc/extensions/kubernetes.raw > /tmp/kubernetes"
        ExecStartPre=/usr/lib/systemd/systemd-sysupdate -C kubernetes update
        ExecStartPost=/usr/bin/sh -c "readlink --canonicalize /etc/extensions/kubernetes.raw > /tmp/kubernetes-new"
        ExecStartPost=/usr/bin/sh -c "if ! cmp --silent /tmp/kubernetes /tmp/kubernetes-new; then touch /run/reboot-required; fi"
`
