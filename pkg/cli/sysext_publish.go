package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

func newSysextPublishCommand() *cobra.Command {
	var (
		url string
	)
	cmd := &cobra.Command{
		Use:   "publish DIR --url URL",
		Short: "Make a directory of sysexts a self-hosted bakery (SHA256SUMS, sysupdate transfer files)",
		Long: `Writes, next to the .raw sysext images in DIR, what a plain web server needs to serve them as
Flatcar's sysext-bakery does:

  SHA256SUMS               sha256sum lines of every .raw (systemd-sysupdate's url-file source reads it)
  FILE.raw.sha512          the sha512 of each (manifests --flavor sysext reads it for Ignition's
                           verification.hash)
  kubernetes-1.NN.conf     the systemd-sysupdate transfer of each Kubernetes minor present: newer
                           kubernetes-v1.NN.<patch>-<arch>.raw from --url
  noop.conf                keeps systemd-sysupdate away from the OS itself

--url is where DIR will be served (the transfer files name it). Then
  flatcar-capo manifests --flavor sysext --sysext-url URL --sysupdate-url URL
makes nodes download the sysext verified, and update to newer patches from that server.`,
		Example: `  flatcar-capo sysext create --kubernetes-version 1.35 --output-file /srv/www/ext/kubernetes-v1.35.2-x86-64.raw
  flatcar-capo sysext publish /srv/www/ext --url http://10.0.0.5/ext`,
		Args: ExactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := sysext.Publish(args[0], url)
			if err != nil {
				return err
			}
			return Report(cmd, p, func(w io.Writer) error {
				for _, s := range p.Sysexts {
					fmt.Fprintf(w, "%s  sha256 %.16s...  sha512 %.16s...\n", s.File, s.SHA256, s.SHA512)
				}
				fmt.Fprintf(w, "Wrote SHA256SUMS, *.raw.sha512, %s and noop.conf in %s for %s\n", strings.Join(p.Transfers, ", "), p.Dir, p.URL)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the http(s) URL DIR is served at (required)")
	AddOutputFlag(cmd.Flags())
	return cmd
}
