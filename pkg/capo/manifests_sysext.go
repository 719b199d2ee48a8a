package capo

import (
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// SysextFlags give the at-boot sysext's sha512 for Ignition's verification.hash, and its
// architecture: --sysext FILE, --insecure-no-hash, --sysupdate-url, --sysupdate-key and --arch.
type SysextFlags struct {
	File           string
	InsecureNoHash bool
	SysupdateURL   string
	SysupdateKey   string // a public keyring FILE
	Arch           string
}

// arch is the at-boot sysext's architecture (systemd's spelling) from --arch, --sysext FILE
// (its extension-release and its name) and the build record. They must agree, or the node would
// download the file of one architecture and check it against the hash of another's. None (or
// only ARCHITECTURE=_any) gives DefaultSysextArch.
func (s SysextFlags) arch(rec *record.Record) (string, error) {
	type source struct{ from, arch string }
	sources := []source{{"--arch", s.Arch}}
	if s.File != "" {
		info, err := sysext.Open(s.File)
		if err != nil {
			return "", errs.Invalidf("--sysext %s: %v (want the Kubernetes sysext image the server serves, e.g. from flatcar-capo sysext create)", s.File, err)
		}
		sources = append(sources, source{"the ARCHITECTURE of --sysext " + s.File, info.Releases[sysext.KubernetesName]["ARCHITECTURE"]})
		for _, a := range []string{"x86-64", "arm64"} { // kubernetes-v1.34.1-arm64.raw: arm64
			if strings.HasSuffix(filepath.Base(s.File), "-"+a+".raw") {
				sources = append(sources, source{"the name of --sysext " + s.File, a})
			}
		}
	}
	if rec != nil {
		sources = append(sources, source{"--from-record (arch " + rec.Arch + ")", rec.Arch})
	}
	var got source
	for _, src := range sources {
		if src.arch == "" || src.arch == "_any" {
			continue
		}
		a, err := sysext.Arch(src.arch)
		if err != nil {
			return "", errs.Invalidf("%s: %v", src.from, err)
		}
		switch {
		case got.arch == "":
			got = source{src.from, a}
		case got.arch != a:
			return "", errs.Invalidf("%s is %s but %s is %s: the node would download kubernetes-<version>-%s.raw and check it against the hash of the %s file; give the sysext of the architecture the nodes run (or --arch to match it)",
				got.from, got.arch, src.from, a, got.arch, a)
		}
	}
	return cmp.Or(got.arch, defaultSysextArch), nil
}

// fill sets KUBERNETES_SYSEXT_SHA512 for the sysext flavor: from --sysext FILE, the build
// record, or the server's FILE.sha512 (downloading the file to check it), and returns the
// sysext's architecture and the --sysupdate-key keyring. Without a Kubernetes version the
// variable is left for clusterctl.
func (s SysextFlags) fill(ctx context.Context, flavor string, values map[string]string, rec *record.Record) (arch string, keyring []byte, err error) {
	if err := (sysextHashOptions{Flavor: flavor, File: s.File, InsecureNoHash: s.InsecureNoHash, SysupdateURL: s.SysupdateURL, SysupdateKey: s.SysupdateKey != ""}).Validate(); err != nil {
		return "", nil, err
	}
	if s.SysupdateKey != "" {
		if keyring, err = sysext.PublicKeyring(s.SysupdateKey); err != nil {
			return "", nil, err
		}
	}
	if flavor != FlavorSysext {
		// The other flavors' image carries its architecture; --arch (often FLATCAR_CAPO_ARCH,
		// set for build in the same job) names nothing here.
		return "", keyring, nil
	}
	if arch, err = s.arch(rec); err != nil {
		return "", nil, err
	}
	if s.InsecureNoHash {
		return arch, keyring, nil
	}
	if _, ok := values[VarSysextSHA512]; ok {
		return arch, keyring, nil
	}
	sum, ok, err := s.sha512(ctx, values, rec, arch)
	if err != nil {
		return "", nil, err
	}
	if ok {
		values[VarSysextSHA512] = sum
	}
	return arch, keyring, nil
}

// sha512 is the served sysext's: of --sysext FILE, from the record, or the server's .sha512
// checked against the file it serves; none (!ok) leaves it for clusterctl (no exact version yet).
func (s SysextFlags) sha512(ctx context.Context, values map[string]string, rec *record.Record, arch string) (sum string, ok bool, err error) {
	version := values[VarKubernetesVersion]
	name, _ := sysext.KubernetesFileName(version, arch)
	switch {
	case s.File != "":
		if base := filepath.Base(s.File); strings.HasPrefix(base, sysext.KubernetesName+"-v") && name != "" && base != name {
			return "", false, errs.Invalidf("--sysext %s is not %s, the file nodes download for --kubernetes-version %s: give the sysext of that version", s.File, name, version)
		}
		if sum, _, err = digest.SHA512(s.File); err != nil {
			return "", false, errs.Invalidf("--sysext: %v", err)
		}
		return sum, true, nil
	case rec != nil:
		for _, a := range rec.Artifacts {
			if a.File == name && name != "" {
				return a.SHA512, true, nil
			}
		}
	}
	if !kubernetes.IsExact(version) {
		return "", false, nil // clusterctl fills KUBERNETES_SYSEXT_SHA512 with the version
	}
	sum, err = servedSHA512(ctx, cmp.Or(values[VarSysextURL], DefaultSysextURL)+"/"+name)
	return sum, err == nil, err
}

// servedSHA512 reads url.sha512 and checks the file at url against it.
func servedSHA512(ctx context.Context, url string) (string, error) {
	fix := "give --sysext FILE (the file the server serves), or --insecure-no-hash"
	c := httpx.New(httpx.Options{Retries: 2})
	b, err := c.GetSmall(ctx, url+".sha512", 4096)
	if err != nil {
		return "", fmt.Errorf("the sysext's sha512 for Ignition's verification.hash: cannot read %s.sha512: %v; publish it there (flatcar-capo sysext publish), or %s", url, err, fix)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 || len(fields[0]) != 128 {
		return "", fmt.Errorf("%s.sha512 holds no sha512 (128 hex digits): %q; %s", url, strings.TrimSpace(string(b)), fix)
	}
	want := strings.ToLower(fields[0])
	body, err := c.Open(ctx, url, 0)
	if err != nil {
		return "", fmt.Errorf("checking %s against its .sha512: %v; %s", url, err, fix)
	}
	defer body.Close()
	h := sha512.New()
	if _, err := io.Copy(h, body); err != nil {
		return "", fmt.Errorf("checking %s against its .sha512: %v; %s", url, err, fix)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return "", fmt.Errorf("%s.sha512 is wrong: it says %.16s..., the file served is %.16s...; nodes would refuse it at boot. Fix the server (flatcar-capo sysext publish rewrites it), or %s", url, want, got, fix)
	}
	return want, nil
}
