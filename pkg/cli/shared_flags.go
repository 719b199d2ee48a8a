package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// The flags release, fetch, build, upload and sysext create share are defined here once (name, default,
// help, environment and validation), so a value means the same on every command.

// addReleaseFlags registers --channel, --version, --arch and --release-server into r.
func addReleaseFlags(fs *pflag.FlagSet, r *release.Release) {
	fs.StringVar(&r.Channel, "channel", "stable", "release channel: "+strings.Join(release.Channels, ", ")+" (env FLATCAR_CHANNEL)")
	fs.StringVar(&r.Version, "version", release.Current, "release: current, a number such as 4230.2.3, or current-YYYY on lts (env FLATCAR_VERSION)")
	addArchFlag(fs, &r.Arch)
	fs.StringVar(&r.Server, "release-server", release.DefaultServer, "release server or mirror; {channel} is replaced by the channel, /<arch>-usr/<version>/<file> is appended")
	alsoFromEnv(fs, "channel", "FLATCAR_CHANNEL")
	alsoFromEnv(fs, "version", "FLATCAR_VERSION")
}

func addArchFlag(fs *pflag.FlagSet, arch *string) {
	fs.StringVar(arch, "arch", "amd64", "architecture: "+strings.Join(release.Arches, ", ")+" (x86-64, x86_64 and aarch64 are understood)")
}

// addNetworkFlags registers --retries, --stall-timeout, --download-timeout and --ca-file, the
// settings of every download the command makes.
func addNetworkFlags(fs *pflag.FlagSet, o *httpx.Options) {
	fs.IntVar(&o.Retries, "retries", httpx.DefaultRetries, "further attempts after a transient network failure (backoff doubles from 0.5 s)")
	fs.DurationVar(&o.StallTimeout, "stall-timeout", httpx.DefaultStallTimeout, "a download that receives nothing (headers or data) for this long is a failure; 0 is the default")
	fs.DurationVar(&o.DownloadTimeout, "download-timeout", httpx.DefaultDownloadTimeout, "each download, retries and resumes included, must finish within this (a trickling server fails); 0 is the default")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA(s) trusted on top of the system's for every download of this host: release server, Kubernetes and GitHub mirrors, registries, --sysext URLs (SSL_CERT_FILE replaces the system's instead)")
}

// notes is the command's stderr, or nowhere when quiet.
func notes(cmd *cobra.Command, quiet bool) io.Writer {
	if quiet {
		return io.Discard
	}
	return cmd.ErrOrStderr()
}

// verifyFlags are --keyring and --insecure-skip-verify.
type verifyFlags struct {
	keyring  string
	insecure bool
}

func addVerifyFlags(fs *pflag.FlagSet, v *verifyFlags) {
	fs.StringVar(&v.keyring, "keyring", "", "OpenPGP public keyring (armored or binary) that replaces the embedded Flatcar key")
	fs.BoolVar(&v.insecure, "insecure-skip-verify", false, "DANGEROUS: skip the OpenPGP and SHA512 checks of the release image (and the cache)")
}

func addCacheFlag(fs *pflag.FlagSet, dir *string) {
	fs.StringVar(dir, "cache-dir", "", "download cache (default $XDG_CACHE_HOME/flatcar-capo)")
}

const kubernetesVersionHelp = "Kubernetes: stable (release/stable.txt of --kubernetes-mirror), a minor such as 1.36 (its latest patch, release/stable-1.36.txt), or an exact " + kubernetes.ExampleVersion

// addKubernetesFlags registers the versions and mirrors of the Kubernetes downloads (build and
// sysext create); version is --kubernetes-version's default ("" makes it required).
func addKubernetesFlags(fs *pflag.FlagSet, k *kubernetes.Options, version string) {
	help := kubernetesVersionHelp
	if version == "" {
		help += " (required)"
	}
	fs.StringVar(&k.Kubernetes, "kubernetes-version", version, help)
	alsoFromEnv(fs, "kubernetes-version", "KUBERNETES_VERSION")
	fs.StringVar(&k.Crictl, "crictl-version", "", "cri-tools release for crictl (default v<minor>.0 of the resolved Kubernetes, as image-builder)")
	fs.StringVar(&k.CNI, "cni-version", "", "containernetworking/plugins release (default: one that fits the Kubernetes minor, "+kubernetes.DefaultCNIVersion+" for 1.33+)")
	fs.StringVar(&k.Mirror, "kubernetes-mirror", kubernetes.DefaultMirror, "replaces "+kubernetes.DefaultMirror+": kubelet/kubeadm/kubectl are <mirror>/<version>/bin/linux/<arch>/<name>(.sha256)")
	fs.StringVar(&k.GitHubMirror, "github-mirror", kubernetes.DefaultGitHubMirror, "replaces "+kubernetes.DefaultGitHubMirror+" for the crictl, CNI plugin, containerd and runc releases")
}

// addContainerdFlags registers the containerd that replaces Flatcar's (build, sysext create
// containerd); its releases come from --github-mirror.
func addContainerdFlags(fs *pflag.FlagSet, c *containerd.Options) {
	fs.StringVar(&c.Version, "containerd-version", "", "containerd release to run instead of Flatcar's built-in one, e.g. 2.3.7: its release tarball and runc from --github-mirror become a containerd sysext that masks containerd-flatcar")
	fs.StringVar(&c.Runc, "runc-version", "", "runc release for --containerd-version (default: the one that containerd release names, e.g. v1.5.2 for 2.3.7)")
}

// signFlags are --sign-key, --sign-cert-uuid and --sign-cert, which `upload` and `build` share.
type signFlags struct{ key, certUUID, cert string }

func (s *signFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.key, "sign-key", "", "PEM private key (RSA, or ECDSA P-384/P-521 for Glance; a cosign key file with $COSIGN_PASSWORD) that signs the image for Glance's signature verification (img_signature*) and writes cosign-compatible .sig files; keep it 0600")
	f.StringVar(&s.certUUID, "sign-cert-uuid", "", "UUID of the --sign-key's X.509 certificate in the cloud's Barbican (img_signature_certificate_uuid)")
	f.StringVar(&s.cert, "sign-cert", "", "PEM X.509 certificate of --sign-key, stored in each cloud's Barbican (reused when already there) instead of --sign-cert-uuid")
}

// signing reads the key and certificate; nil without --sign-key. withGlance: the image goes to
// Glance, so a certificate is required.
func (s *signFlags) signing(withGlance bool) (*signing.Key, *glance.Signing, error) {
	if s.key == "" {
		if s.certUUID != "" || s.cert != "" {
			return nil, nil, errs.Invalidf("--sign-cert-uuid and --sign-cert need --sign-key, the private key that signs")
		}
		return nil, nil, nil
	}
	key, err := signing.LoadKey(s.key)
	if err != nil {
		return nil, nil, err
	}
	if !withGlance {
		if s.certUUID != "" || s.cert != "" {
			return nil, nil, errs.Invalidf("--sign-cert-uuid and --sign-cert are for Glance: give --cloud too, or leave them out to write only the .sig files")
		}
		return key, nil, nil
	}
	g := &glance.Signing{Key: key, CertUUID: s.certUUID, CertPath: s.cert}
	if s.cert != "" {
		if g.Cert, err = signing.LoadCertificate(s.cert); err != nil {
			return nil, nil, err
		}
	}
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	return key, g, nil
}
