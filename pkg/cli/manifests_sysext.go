package cli

import (
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// addSysextHashFlags give the at-boot sysext's sha512 for Ignition's verification.hash, and
// its architecture.
func addSysextHashFlags(f *pflag.FlagSet, s *capo.SysextFlags) {
	f.StringVar(&s.File, "sysext", "", "--flavor sysext: the sysext FILE the server serves; its sha512 goes into Ignition's verification.hash and its architecture (extension-release ARCHITECTURE, file name) into the file name nodes download (default: <sysext-url>/<file>.sha512, checked against the file, or --from-record)")
	f.BoolVar(&s.InsecureNoHash, "insecure-no-hash", false, "DANGEROUS: --flavor sysext without verification.hash (nodes boot whatever the server sends)")
	f.StringVar(&s.SysupdateURL, "sysupdate-url", "", "--flavor sysext|sysext-baked: the self-hosted bakery (sysext publish) nodes take Kubernetes patch updates from with systemd-sysupdate")
	f.StringVar(&s.SysupdateKey, "sysupdate-key", "", "with --sysupdate-url: the public OpenPGP key FILE of a bakery published with --sign-key; installed as "+sysext.ImportPubring+" and the transfer says Verify=true")
	f.StringVar(&s.Arch, "arch", "", "--flavor sysext: the nodes' architecture, amd64 (x86-64) or arm64, naming kubernetes-<version>-<arch>.raw (default: from --sysext FILE or --from-record, else amd64); a different one there is refused (the other flavors' image carries its own)")
}
