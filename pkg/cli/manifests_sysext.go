package cli

import (
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/build"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// sysextHashFlags give the at-boot sysext's sha512 for Ignition's verification.hash.
type sysextHashFlags struct {
	file         string
	insecure     bool
	sysupdateURL string
	sysupdateKey string
	keyring      []byte // read from sysupdateKey by fill
}

func addSysextHashFlags(f *pflag.FlagSet, s *sysextHashFlags) {
	f.StringVar(&s.file, "sysext", "", "--flavor sysext: the sysext FILE the server serves; its sha512 goes into Ignition's verification.hash (default: <sysext-url>/<file>.sha512, checked against the file, or --from-record)")
	f.BoolVar(&s.insecure, "insecure-no-hash", false, "DANGEROUS: --flavor sysext without verification.hash (nodes boot whatever the server sends)")
	f.StringVar(&s.sysupdateURL, "sysupdate-url", "", "--flavor sysext|sysext-baked: the self-hosted bakery (sysext publish) nodes take Kubernetes patch updates from with systemd-sysupdate")
	f.StringVar(&s.sysupdateKey, "sysupdate-key", "", "with --sysupdate-url: the public OpenPGP key FILE of a bakery published with --sign-key; installed as "+sysext.ImportPubring+" and the transfer says Verify=true")
}

// sysextSHA512 fills KUBERNETES_SYSEXT_SHA512 for the sysext flavor: from --sysext FILE, the build
// record, or the server's FILE.sha512 (downloading the file to check it). Without a Kubernetes
// version the variable is left for clusterctl.
func (s *sysextHashFlags) fill(ctx context.Context, flavor string, values map[string]string, rec *build.Record) (err error) {
	if err := (capo.SysextHashOptions{Flavor: flavor, File: s.file, InsecureNoHash: s.insecure, SysupdateURL: s.sysupdateURL, SysupdateKey: s.sysupdateKey != ""}).Validate(); err != nil {
		return err
	}
	if s.sysupdateKey != "" {
		if s.keyring, err = sysext.PublicKeyring(s.sysupdateKey); err != nil {
			return err
		}
	}
	if flavor != capo.FlavorSysext || s.insecure {
		return nil
	}
	if _, ok := values[capo.VarSysextSHA512]; ok {
		return nil
	}
	version := values[capo.VarKubernetesVersion]
	name, _ := sysext.KubernetesFileName(version, "x86-64")
	switch {
	case s.file != "":
		sum, _, err := digest.SHA512(s.file)
		if err != nil {
			return Usagef("--sysext: %v", err)
		}
		values[capo.VarSysextSHA512] = sum
		return nil
	case rec != nil:
		for _, a := range rec.Artifacts {
			if a.File == name && name != "" {
				values[capo.VarSysextSHA512] = a.SHA512
				return nil
			}
		}
	}
	if !kubernetes.IsExact(version) {
		return nil // clusterctl fills KUBERNETES_SYSEXT_SHA512 with the version
	}
	url := cmp.Or(values[capo.VarSysextURL], capo.DefaultSysextURL) + "/" + name
	fix := "give --sysext FILE (the file the server serves), or --insecure-no-hash"
	c := httpx.New(httpx.Options{Retries: 2})
	b, err := c.GetSmall(ctx, url+".sha512", 4096)
	if err != nil {
		return fmt.Errorf("the sysext's sha512 for Ignition's verification.hash: cannot read %s.sha512: %v; publish it there (flatcar-capo sysext publish), or %s", url, err, fix)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 || len(fields[0]) != 128 {
		return fmt.Errorf("%s.sha512 holds no sha512 (128 hex digits): %q; %s", url, strings.TrimSpace(string(b)), fix)
	}
	want := strings.ToLower(fields[0])
	body, err := c.Open(ctx, url, 0)
	if err != nil {
		return fmt.Errorf("checking %s against its .sha512: %v; %s", url, err, fix)
	}
	defer body.Close()
	h := sha512.New()
	if _, err := io.Copy(h, body); err != nil {
		return fmt.Errorf("checking %s against its .sha512: %v; %s", url, err, fix)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s.sha512 is wrong: it says %.16s..., the file served is %.16s...; nodes would refuse it at boot. Fix the server (flatcar-capo sysext publish rewrites it), or %s", url, want, got, fix)
	}
	values[capo.VarSysextSHA512] = want
	return nil
}
