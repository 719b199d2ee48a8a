package sysext

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
)

// SysupdateConf is the systemd-sysupdate transfer of Flatcar's sysext-bakery (kubernetes/
// kubernetes-v1.NN.transfer and .conf, which CAPO's flatcar-sysext template installs in
// /etc/sysupdate.kubernetes.d/): newer patch releases of version's minor from the directory url,
// %a being systemd's architecture name. verify makes systemd-sysupdate check SHA256SUMS.gpg.
func SysupdateConf(version, url string, verify bool) ([]byte, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	if err := ValidBakeryURL("--url", url); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return []byte(fmt.Sprintf(`[Transfer]
Verify=%t

[Source]
Type=url-file
Path=%s
MatchPattern=kubernetes-v%s.@v-%%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=%s
CurrentSymlink=%s
`, verify, url, minor(version), KubernetesDir, KubernetesLink)), nil
}

// SysupdateNoop (the bakery's noop.transfer and noop.conf, in /etc/sysupdate.d/) keeps systemd-sysupdate
// from touching the OS itself: only the component above is updated.
const SysupdateNoop = `[Source]
Type=regular-file
Path=/
MatchPattern=invalid@v.raw

[Target]
Type=regular-file
Path=/
`

// TransferExts are the names of a transfer file, each written with the same content:
// systemd >= 257 reads *.transfer and falls back to *.conf only when a directory set holds no
// .transfer at all; systemd 255 (Flatcar LTS) reads only *.conf. With both in one directory every
// systemd reads exactly one of them, whatever Flatcar the node runs.
var TransferExts = []string{".transfer", ".conf"}

// TransferName is the bakery's transfer file of a Kubernetes minor with ext (one of
// TransferExts), kubernetes-v1.35.transfer, published under TransferDir and installed in
// /etc/sysupdate.kubernetes.d/.
func TransferName(version, ext string) string {
	if m := minor(version); m != "" {
		return "kubernetes-v" + m + ext
	}
	return ""
}

// NoopName is the bakery's noop transfer with ext (noop.transfer, noop.conf).
func NoopName(ext string) string { return "noop" + ext }

// transferDir is the bakery's directory of the Kubernetes transfers (extensions/kubernetes/).
const transferDir = "kubernetes"

// flatTransferName is the name publish wrote before it followed the bakery (kubernetes-1.35.conf
// next to the images); it is still written so configs pointing at it keep working.
func flatTransferName(version string) string {
	if m := minor(version); m != "" {
		return "kubernetes-" + m + ".conf"
	}
	return ""
}

func minor(version string) string {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

var kubernetesRaw = regexp.MustCompile(`^kubernetes-(v\d+\.\d+\.\d+)-(x86-64|arm64)\.raw$`)

// KubernetesFileVersion is the version a bakery file name carries (kubernetes-v1.35.2-x86-64.raw:
// v1.35.2), "" for other names.
func KubernetesFileVersion(name string) string {
	if m := kubernetesRaw.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// Published is what Publish wrote.
type Published struct {
	Dir       string            `json:"dir"`
	URL       string            `json:"url"`
	Sysexts   []PublishedSysext `json:"sysexts"`
	Transfers []string          `json:"transfers"`           // kubernetes/kubernetes-v1.NN.{transfer,conf}, noop.{transfer,conf} (and the flat kubernetes-1.NN.conf)
	Signature string            `json:"signature,omitempty"` // SHA256SUMS.gpg when signed
	Signer    string            `json:"signer,omitempty"`    // the signing key's fingerprint
	Verify    bool              `json:"verify"`              // the transfers' Verify=
}

// PublishedSysext is one .raw with its hashes.
type PublishedSysext struct {
	File    string `json:"file"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	SHA512  string `json:"sha512"`
}

// PublishOptions are sysext publish's flags.
type PublishOptions struct {
	URL     string
	SignKey string // an OpenPGP private key file: SHA256SUMS.gpg and Verify=true
}

// Publish makes dir a self-hosted bakery served at url, in the bakery's layout: SHA256SUMS over
// every .raw (what systemd-sysupdate's url-file source reads), FILE.raw.sha512 beside each (what
// manifests --flavor sysext reads for Ignition's verification.hash),
// kubernetes/kubernetes-v1.NN.transfer and .conf for each Kubernetes minor present (and the flat
// kubernetes-1.NN.conf of earlier versions), noop.transfer and noop.conf, and with a signing key
// SHA256SUMS.gpg.
// Every name and the URL are checked before anything is written; each file is written to a
// temporary name first.
func Publish(dir string, o PublishOptions) (*Published, error) {
	if err := ValidBakeryURL("--url", o.URL); err != nil {
		return nil, err
	}
	var signer *openpgp.Entity
	if o.SignKey != "" {
		var err error
		if signer, err = loadSigningKey(o.SignKey); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var raws []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".raw") {
			continue
		}
		if err := validPublishName(e.Name()); err != nil {
			return nil, err
		}
		raws = append(raws, e.Name())
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%s holds no .raw sysext images (make one with flatcar-capo sysext create --output-file %s/kubernetes-<version>-x86-64.raw)", dir, dir)
	}
	p := &Published{Dir: dir, URL: strings.TrimRight(o.URL, "/"), Verify: signer != nil}
	var sums []string
	minors := map[string]string{} // minor -> a version of that minor
	for _, name := range raws {
		h, _, err := digest.Files(filepath.Join(dir, name), sha256.New(), sha512.New())
		if err != nil {
			return nil, err
		}
		s := PublishedSysext{File: name, SHA256: h[0], SHA512: h[1]}
		if m := kubernetesRaw.FindStringSubmatch(name); m != nil {
			s.Version = m[1]
			minors[minor(m[1])] = m[1]
		}
		p.Sysexts = append(p.Sysexts, s)
		sums = append(sums, s.SHA256+"  "+s.File+"\n")
		if err := atomicfile.WriteFile(filepath.Join(dir, name+".sha512"), []byte(s.SHA512+"  "+s.File+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	sort.Strings(sums)
	sumsFile := []byte(strings.Join(sums, ""))
	// Between the two renames a reader sees sums and signature disagree: with Verify=true
	// systemd-sysupdate then refuses the update (fails closed) and takes it on its next run.
	sigPath := filepath.Join(dir, signatureFile)
	if signer != nil {
		sig, err := signDetached(signer, sumsFile)
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(sigPath, sig, 0o644); err != nil {
			return nil, err
		}
		p.Signature, p.Signer = signatureFile, fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint)
	} else if err := os.Remove(sigPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err // unsigned now: a signature of other sums would only mislead
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "SHA256SUMS"), sumsFile, 0o644); err != nil {
		return nil, err
	}
	if len(minors) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, transferDir), 0o755); err != nil {
			return nil, err
		}
	}
	for _, v := range minors {
		conf, err := SysupdateConf(v, p.URL, p.Verify)
		if err != nil {
			return nil, err
		}
		names := []string{flatTransferName(v)}
		for _, ext := range TransferExts {
			names = append(names, filepath.Join(transferDir, TransferName(v, ext)))
		}
		for _, name := range names {
			if err := atomicfile.WriteFile(filepath.Join(dir, name), conf, 0o644); err != nil {
				return nil, err
			}
			p.Transfers = append(p.Transfers, name)
		}
	}
	for _, ext := range TransferExts {
		if err := atomicfile.WriteFile(filepath.Join(dir, NoopName(ext)), []byte(SysupdateNoop), 0o644); err != nil {
			return nil, err
		}
		p.Transfers = append(p.Transfers, NoopName(ext))
	}
	sort.Strings(p.Transfers)
	return p, nil
}
