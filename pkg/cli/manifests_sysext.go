package cli

import (
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/build"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// sysextHashFlags give the at-boot sysext's sha512 for Ignition's verification.hash, and its
// architecture.
type sysextHashFlags struct {
	file         string
	insecure     bool
	sysupdateURL string
	sysupdateKey string
	keyring      []byte // read from sysupdateKey by fill
	arch         string
}

func addSysextHashFlags(f *pflag.FlagSet, s *sysextHashFlags) {
	f.StringVar(&s.file, "sysext", "", "--flavor sysext: the sysext FILE the server serves; its sha512 goes into Ignition's verification.hash and its architecture (extension-release ARCHITECTURE, file name) into the file name nodes download (default: <sysext-url>/<file>.sha512, checked against the file, or --from-record)")
	f.BoolVar(&s.insecure, "insecure-no-hash", false, "DANGEROUS: --flavor sysext without verification.hash (nodes boot whatever the server sends)")
	f.StringVar(&s.sysupdateURL, "sysupdate-url", "", "--flavor sysext|sysext-baked: the self-hosted bakery (sysext publish) nodes take Kubernetes patch updates from with systemd-sysupdate")
	f.StringVar(&s.sysupdateKey, "sysupdate-key", "", "with --sysupdate-url: the public OpenPGP key FILE of a bakery published with --sign-key; installed as "+sysext.ImportPubring+" and the transfer says Verify=true")
	f.StringVar(&s.arch, "arch", "", "--flavor sysext: the nodes' architecture, amd64 (x86-64) or arm64, naming kubernetes-<version>-<arch>.raw (default: from --sysext FILE or --from-record, else amd64); a different one there is refused (the other flavors' image carries its own)")
}

// sysextArch is the at-boot sysext's architecture from --arch, --sysext FILE (its
// extension-release and its name) and the build record, which must agree.
func (s *sysextHashFlags) sysextArch(rec *build.Record) (string, error) {
	var sources []capo.ArchSource
	if s.arch != "" {
		sources = append(sources, capo.ArchSource{From: "--arch", Arch: s.arch})
	}
	if s.file != "" {
		info, err := sysext.Open(s.file)
		if err != nil {
			return "", Usagef("--sysext %s: %v (want the Kubernetes sysext image the server serves, e.g. from flatcar-capo sysext create)", s.file, err)
		}
		if rel, ok := info.Releases[sysext.KubernetesName]; ok {
			sources = append(sources, capo.ArchSource{From: "the ARCHITECTURE of --sysext " + s.file, Arch: rel["ARCHITECTURE"]})
		}
		sources = append(sources, capo.ArchSource{From: "the name of --sysext " + s.file, Arch: capo.ArchFromFileName(filepath.Base(s.file))})
	}
	if rec != nil {
		sources = append(sources, capo.ArchSource{From: "--from-record (arch " + rec.Arch + ")", Arch: rec.Arch})
	}
	return capo.SysextArchOf(sources)
}

// fill sets KUBERNETES_SYSEXT_SHA512 for the sysext flavor: from --sysext FILE, the build
// record, or the server's FILE.sha512 (downloading the file to check it), and returns the
// sysext's architecture. Without a Kubernetes version the variable is left for clusterctl.
func (s *sysextHashFlags) fill(ctx context.Context, flavor string, values map[string]string, rec *build.Record) (arch string, err error) {
	if err := (capo.SysextHashOptions{Flavor: flavor, File: s.file, InsecureNoHash: s.insecure, SysupdateURL: s.sysupdateURL, SysupdateKey: s.sysupdateKey != ""}).Validate(); err != nil {
		return "", err
	}
	if s.sysupdateKey != "" {
		if s.keyring, err = sysext.PublicKeyring(s.sysupdateKey); err != nil {
			return "", err
		}
	}
	if flavor != capo.FlavorSysext {
		// The other flavors' image carries its architecture; --arch (often FLATCAR_CAPO_ARCH,
		// set for build in the same job) names nothing here.
		return "", nil
	}
	if arch, err = s.sysextArch(rec); err != nil {
		return "", err
	}
	if s.insecure {
		return arch, nil
	}
	if _, ok := values[capo.VarSysextSHA512]; ok {
		return arch, nil
	}
	version := values[capo.VarKubernetesVersion]
	name, _ := sysext.KubernetesFileName(version, arch)
	switch {
	case s.file != "":
		if base := filepath.Base(s.file); strings.HasPrefix(base, sysext.KubernetesName+"-v") && name != "" && base != name {
			return "", Usagef("--sysext %s is not %s, the file nodes download for --kubernetes-version %s: give the sysext of that version", s.file, name, version)
		}
		sum, _, err := digest.SHA512(s.file)
		if err != nil {
			return "", Usagef("--sysext: %v", err)
		}
		values[capo.VarSysextSHA512] = sum
		return arch, nil
	case rec != nil:
		for _, a := range rec.Artifacts {
			if a.File == name && name != "" {
				values[capo.VarSysextSHA512] = a.SHA512
				return arch, nil
			}
		}
	}
	if !kubernetes.IsExact(version) {
		return arch, nil // clusterctl fills KUBERNETES_SYSEXT_SHA512 with the version
	}
	url := cmp.Or(values[capo.VarSysextURL], capo.DefaultSysextURL) + "/" + name
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
	values[capo.VarSysextSHA512] = want
	return arch, nil
}
