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

// validate turns the flags into a release, or a usage error (exit 2) naming the valid values.
func (r *releaseFlags) validate(cmd *cobra.Command) (release.Release, error) {
	if err := validateRelease(&r.rel); err != nil {
		return r.rel, err
	}
	if err := release.ValidateImage(r.image); err != nil {
		return r.rel, Usagef("invalid --image: %w", err)
	}
	if err := r.net.Validate(); err != nil {
		return r.rel, err
	}
	return r.rel, nil
}

type releaseReport struct {
	Channel          string             `json:"channel"`
	Arch             string             `json:"arch"`
	RequestedVersion string             `json:"requestedVersion"`
	Version          string             `json:"version"`
	Image            string             `json:"image"`
	DirURL           string             `json:"dirUrl"`
	VersionTxt       string             `json:"versionTxtUrl"`
	Artifacts        []release.Artifact `json:"artifacts"`
	// With --kubernetes-version: what it resolves to and the downloads a build would make.
	KubernetesRequested string            `json:"kubernetesRequested,omitempty"`
	KubernetesVersion   string            `json:"kubernetesVersion,omitempty"`
	KubernetesDownloads []kubernetes.File `json:"kubernetesDownloads,omitempty"`
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
		Args: ExactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			rel, err := rf.validate(cmd)
			if err != nil {
				return err
			}
			ko.Arch = rel.Arch
			if k := ko; ko.Kubernetes != "" {
				if err := ko.Validate(); err != nil {
					return err
				}
			} else if err := k.Validate(); err != nil { // the mirrors, also when unused
				return err
			}
			c, err := newClient(cmd, rf.net, false)
			if err != nil {
				return err
			}
			resolved, err := fetch.Resolve(cmd.Context(), c, rel)
			if err != nil {
				return err
			}
			r := releaseReport{Channel: resolved.Channel, Arch: resolved.Arch, RequestedVersion: rel.Version,
				Version: resolved.Version, Image: rf.image, DirURL: resolved.DirURL(), VersionTxt: resolved.URL(release.VersionFile)}
			for _, comp := range []string{release.CompressionNone, release.CompressionBzip2} {
				r.Artifacts = append(r.Artifacts, resolved.Artifact(release.ImageFile(rf.image, comp)))
			}
			if ko.Kubernetes != "" {
				r.KubernetesRequested = ko.Kubernetes
				if err := ko.Resolve(cmd.Context(), c); err != nil {
					return err
				}
				r.KubernetesVersion, r.KubernetesDownloads = ko.Kubernetes, ko.Files()
			}
			return Report(cmd, r, func(w io.Writer) error {
				fmt.Fprintf(w, "Flatcar %s %s (%s; %s resolved to %s)\n", r.Channel, r.Version, r.Arch, r.RequestedVersion, r.Version)
				fmt.Fprintf(w, "%-12s %s\n", "version.txt", r.VersionTxt)
				for _, a := range r.Artifacts {
					fmt.Fprintf(w, "%s\n  image        %s\n  DIGESTS      %s\n  DIGESTS.asc  %s\n  sig          %s\n",
						a.File, a.URL, a.DigestsURL, a.SignedDigests, a.SignatureURL)
				}
				if r.KubernetesVersion != "" {
					fmt.Fprintf(w, "Kubernetes %s (%s resolved to %s)\n", r.KubernetesVersion, r.KubernetesRequested, r.KubernetesVersion)
					for _, d := range r.KubernetesDownloads {
						fmt.Fprintf(w, "  %-16s %s\n", d.Name, d.URL)
					}
				}
				return nil
			})
		},
	}
	addReleaseImageFlags(cmd.Flags(), &rf)
	addKubernetesVersionFlag(cmd.Flags(), &ko.Kubernetes, "")
	cmd.Flags().Lookup("kubernetes-version").Usage = "also resolve this " + kubernetesVersionHelp
	cmd.Flags().StringVar(&ko.Mirror, "kubernetes-mirror", kubernetes.DefaultMirror, "where --kubernetes-version's stable.txt / stable-1.NN.txt and the binaries are")
	cmd.Flags().StringVar(&ko.GitHubMirror, "github-mirror", kubernetes.DefaultGitHubMirror, "replaces https://github.com for crictl and the CNI plugins")
	AddOutputFlag(cmd.Flags())
	return cmd
}
