package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// releaseFlags are the flags release and fetch share to name a release and reach it.
type releaseFlags struct {
	rel   release.Release
	image string
	net   httpx.Options
}

func addReleaseImageFlags(fs *pflag.FlagSet, r *releaseFlags) {
	addReleaseFlags(fs, &r.rel)
	fs.StringVar(&r.image, "image", "qemu", "image: "+strings.Join(release.Images, ", "))
	addNetworkFlags(fs, &r.net)
}

func newReleaseCommand() *cobra.Command {
	var (
		rf releaseFlags
		ko kubernetes.Options
	)
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Resolve a channel/version to a release number and its artifact URLs",
		Long: `Resolve a Flatcar channel and version (current is read from the server's version.txt) and
print the release number with the URLs of the image (.img, a qcow2, and .img.bz2) and of their
DIGESTS, DIGESTS.asc and .sig. A pinned version is checked to exist on the server.`,
		Example: `  flatcar-capo release --channel stable
  FLATCAR_CHANNEL=beta FLATCAR_VERSION=4230.1.0 flatcar-capo release -o json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.net.Log = cmd.ErrOrStderr()
			d, err := fetch.Describe(cmd.Context(), fetch.DescribeOptions{Release: rf.rel, Image: rf.image, Network: rf.net, Kubernetes: ko})
			if err != nil {
				return err
			}
			return report(cmd, d, func(w io.Writer) error {
				fmt.Fprintf(w, "Flatcar %s %s (%s; %s resolved to %s)\n", d.Channel, d.Version, d.Arch, d.RequestedVersion, d.Version)
				fmt.Fprintf(w, "%-12s %s\n", "version.txt", d.VersionTxt)
				for _, a := range d.Artifacts {
					fmt.Fprintf(w, "%s\n  image        %s\n  DIGESTS      %s\n  DIGESTS.asc  %s\n  sig          %s\n",
						a.File, a.URL, a.DigestsURL, a.SignedDigests, a.SignatureURL)
				}
				if d.KubernetesVersion != "" {
					fmt.Fprintf(w, "Kubernetes %s (%s resolved to %s)\n", d.KubernetesVersion, d.KubernetesRequested, d.KubernetesVersion)
					for _, d := range d.KubernetesDownloads {
						fmt.Fprintf(w, "  %-16s %s\n", d.Name, d.URL)
					}
				}
				return nil
			})
		},
	}
	addReleaseImageFlags(cmd.Flags(), &rf)
	cmd.Flags().StringVar(&ko.Kubernetes, "kubernetes-version", "", "also resolve this "+kubernetesVersionHelp)
	cmd.Flags().StringVar(&ko.Mirror, "kubernetes-mirror", kubernetes.DefaultMirror, "where --kubernetes-version's stable.txt / stable-1.NN.txt and the binaries are")
	cmd.Flags().StringVar(&ko.GitHubMirror, "github-mirror", kubernetes.DefaultGitHubMirror, "replaces https://github.com for crictl and the CNI plugins")
	addOutputFlag(cmd.Flags())
	return cmd
}
