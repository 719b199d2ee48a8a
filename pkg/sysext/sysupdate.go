package sysext

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// SysupdateConf is the systemd-sysupdate transfer of Flatcar's sysext-bakery (kubernetes-1.NN.conf,
// which CAPO's flatcar-sysext template installs as /etc/sysupdate.kubernetes.d/): newer patch
// releases of version's minor from the directory url, %a being systemd's architecture name.
func SysupdateConf(version, url string) ([]byte, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return []byte(fmt.Sprintf(`[Transfer]
Verify=false

[Source]
Type=url-file
Path=%s
MatchPattern=kubernetes-v%s.%s.@v-%%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=%s
CurrentSymlink=%s
`, url, parts[0], parts[1], KubernetesDir, KubernetesLink)), nil
}

// SysupdateNoop (the bakery's noop.conf, /etc/sysupdate.d/noop.conf) keeps systemd-sysupdate
// from touching the OS itself: only the component above is updated.
const SysupdateNoop = `[Source]
Type=regular-file
Path=/
MatchPattern=invalid@v.raw

[Target]
Type=regular-file
Path=/
`

// TransferName is the bakery's transfer file of a Kubernetes minor: kubernetes-1.35.conf.
func TransferName(version string) string {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) < 2 {
		return ""
	}
	return "kubernetes-" + parts[0] + "." + parts[1] + ".conf"
}

var kubernetesRaw = regexp.MustCompile(`^kubernetes-(v\d+\.\d+\.\d+)-(x86-64|arm64)\.raw$`)

// Published is what Publish wrote.
type Published struct {
	Dir       string            `json:"dir"`
	URL       string            `json:"url"`
	Sysexts   []PublishedSysext `json:"sysexts"`
	Transfers []string          `json:"transfers"` // kubernetes-1.NN.conf files
}

// PublishedSysext is one .raw with its hashes.
type PublishedSysext struct {
	File    string `json:"file"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	SHA512  string `json:"sha512"`
}

// Publish makes dir a self-hosted bakery served at url: SHA256SUMS over every .raw (what
// systemd-sysupdate's url-file source reads), FILE.raw.sha512 beside each (what manifests
// --flavor sysext reads for Ignition's verification.hash), kubernetes-1.NN.conf for each
// Kubernetes minor present and noop.conf. Each file is written to a temporary name first.
func Publish(dir, url string) (*Published, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, errs.Invalidf("--url %q: want the http(s) URL DIR is served at, e.g. http://10.0.0.5/ext", url)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &Published{Dir: dir, URL: strings.TrimRight(url, "/")}
	var sums []string
	minors := map[string]string{} // transfer name -> a version of that minor
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".raw") {
			continue
		}
		s, err := hashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		s.File = e.Name()
		if m := kubernetesRaw.FindStringSubmatch(e.Name()); m != nil {
			s.Version = m[1]
			minors[TransferName(m[1])] = m[1]
		}
		p.Sysexts = append(p.Sysexts, s)
		sums = append(sums, s.SHA256+"  "+s.File+"\n")
		if err := atomicfile.WriteFile(filepath.Join(dir, e.Name()+".sha512"), []byte(s.SHA512+"  "+s.File+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	if len(p.Sysexts) == 0 {
		return nil, fmt.Errorf("%s holds no .raw sysext images (make one with flatcar-capo sysext create --output-file %s/kubernetes-<version>-x86-64.raw)", dir, dir)
	}
	sort.Strings(sums)
	if err := atomicfile.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(sums, "")), 0o644); err != nil {
		return nil, err
	}
	for name, v := range minors {
		conf, err := SysupdateConf(v, p.URL)
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, name), conf, 0o644); err != nil {
			return nil, err
		}
		p.Transfers = append(p.Transfers, name)
	}
	sort.Strings(p.Transfers)
	return p, atomicfile.WriteFile(filepath.Join(dir, "noop.conf"), []byte(SysupdateNoop), 0o644)
}

func hashFile(path string) (PublishedSysext, error) {
	sums, _, err := digest.Files(path, sha256.New(), sha512.New())
	if err != nil {
		return PublishedSysext{}, err
	}
	return PublishedSysext{SHA256: sums[0], SHA512: sums[1]}, nil
}
