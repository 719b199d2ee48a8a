package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

func newSysextPublishCommand() *cobra.Command {
	var o sysext.PublishOptions
	cmd := &cobra.Command{
		Use:   "publish DIR --url URL [--sign-key KEY]",
		Short: "Make a directory of sysexts a self-hosted bakery (SHA256SUMS, signed, sysupdate transfer files)",
		Long: `Writes, next to the .raw sysext images in DIR, what a plain web server needs to serve them as
Flatcar's sysext-bakery does:

  SHA256SUMS                          sha256sum lines of every .raw (systemd-sysupdate's url-file
                                      source reads it)
  SHA256SUMS.gpg                      with --sign-key: its detached OpenPGP signature, which
                                      systemd-sysupdate checks with gpg when a transfer says Verify=true
  FILE.raw.sha512                     the sha512 of each (manifests --flavor sysext reads it for
                                      Ignition's verification.hash)
  kubernetes/kubernetes-v1.NN.transfer
  kubernetes/kubernetes-v1.NN.conf    the systemd-sysupdate transfer of each Kubernetes minor present
                                      (the bakery's name and place): newer
                                      kubernetes-v1.NN.<patch>-<arch>.raw from --url; Verify=true
                                      when signed. systemd 257+ reads .transfer, systemd 255
                                      (Flatcar LTS) only .conf: both are written, the same file.
                                      It is also written as kubernetes-1.NN.conf, the name earlier
                                      versions used.
  noop.transfer, noop.conf            keeps systemd-sysupdate away from the OS itself

So URL/kubernetes/kubernetes-v1.NN.{transfer,conf}, URL/noop.{transfer,conf} and URL/kubernetes-v1.NN.P-x86-64.raw
are where CAPO's flatcar-sysext template and the bakery's docs look on extensions.flatcar.org.

--url is where DIR will be served (the transfer files name it): http(s), no credentials, query
or '%'. File names must be plain (letters, digits, . _ + ~ -): nothing can add a line to
SHA256SUMS or a key to a transfer. --sign-key is an unprotected OpenPGP private key (armored or
binary, gpg --export-secret-keys); give nodes its public key with
  flatcar-capo manifests --flavor sysext --sysext-url URL --sysupdate-url URL --sysupdate-key PUB
which installs it as /etc/systemd/import-pubring.gpg, where systemd-sysupdate's gpg reads it.`,
		Example: `  flatcar-capo sysext create --kubernetes-version 1.35 --output-file /srv/www/ext/kubernetes-v1.35.2-x86-64.raw
  flatcar-capo sysext publish /srv/www/ext --url http://10.0.0.5/ext --sign-key /run/secrets/bakery.key`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := sysext.Publish(args[0], o)
			if err != nil {
				return err
			}
			return report(cmd, p, func(w io.Writer) error {
				for _, s := range p.Sysexts {
					fmt.Fprintf(w, "%s  sha256 %.16s...  sha512 %.16s...\n", s.File, s.SHA256, s.SHA512)
				}
				signed := "unsigned (transfers say Verify=false)"
				if p.Signature != "" {
					signed = "signed by " + p.Signer + " (" + p.Signature + ", transfers say Verify=true)"
				}
				fmt.Fprintf(w, "Wrote SHA256SUMS, *.raw.sha512 and %s in %s for %s, %s\n", strings.Join(p.Transfers, ", "), p.Dir, p.URL, signed)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&o.URL, "url", "", "the http(s) URL DIR is served at (required)")
	cmd.Flags().StringVar(&o.SignKey, "sign-key", "", "an unprotected OpenPGP private key FILE: writes SHA256SUMS.gpg and Verify=true in the transfers")
	addOutputFlag(cmd.Flags())
	return cmd
}
