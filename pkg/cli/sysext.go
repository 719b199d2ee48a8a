package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

func newSysextCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sysext",
		Short: "Make a Kubernetes systemd-sysext image, or check whether Flatcar would merge one",
		Long: `A systemd system extension (sysext) is a squashfs image that systemd-sysext overlays onto
/usr at boot. Flatcar runs Kubernetes from one: CAPO's flatcar-sysext flavor downloads
kubernetes-<version>-<arch>.raw at first boot, and 'build --method sysext' bakes it into the image.

  create   make the Kubernetes sysext from the Kubernetes release binaries (sha256-checked),
           in pure Go, without root: for users who keep Flatcar's stock image and serve
           sysexts themselves (e.g. with manifests --flavor sysext --sysext-url);
           'create containerd' makes the containerd sysext that 'build --containerd-version' bakes
  inspect  show a sysext's extension-release and files, and whether Flatcar would merge it

A sysext is merged only when /etc/extensions/NAME.raw carries
usr/lib/extension-release.d/extension-release.NAME (NAME is the link's name, not the versioned
file's), with ID=_any or ID=flatcar + SYSEXT_LEVEL=1.0, ARCHITECTURE=x86-64|arm64, and no
usr/lib/os-release.`,
	}
	cmd.AddCommand(newSysextCreateCommand(), newSysextInspectCommand(), newSysextPublishCommand())
	return cmd
}

func newSysextCreateCommand() *cobra.Command {
	var (
		dl          kubernetes.Options
		net         httpx.Options
		binaries    string
		releaseID   string
		compression string
		level       int
		outFile     string
		ctr         containerd.Options
	)
	cmd := &cobra.Command{
		Use:   "create [kubernetes|containerd] --kubernetes-version VERSION | --containerd-version VERSION [--output-file FILE]",
		Short: "Make the Kubernetes sysext (kubelet, kubeadm, kubectl, crictl, CNI plugins, units)",
		Long: `Downloads kubelet, kubeadm and kubectl (dl.k8s.io), crictl and the CNI plugins (GitHub releases),
checks each against its published .sha256 (kept in the download cache), and writes a sysext with
the layout of Flatcar's sysext-bakery:

  /usr/bin/{kubelet,kubeadm,kubectl,crictl}
  /usr/local/bin/cni/*            copied to /opt/cni/bin by kubelet.service (ExecStartPre)
  /usr/lib/systemd/system/kubelet.service, kubelet.service.d/10-kubeadm.conf
  /usr/lib/systemd/system/multi-user.target.d/10-kubelet-service.conf   (Upholds=kubelet.service)
  /usr/lib/extension-release.d/extension-release.kubernetes   (ID=_any, ARCHITECTURE, EXTENSION_RELOAD_MANAGER=1)

Every file is owned by root. The image is squashfs (gzip level 1 by default, or zstd; Flatcar's
kernel reads both), written in pure Go without root; it is read back and checked before it appears at --output-file (default:
kubernetes-<version>-<arch>.raw in the current directory). With SOURCE_DATE_EPOCH set, the same
inputs give the same bytes.

Install it on a Flatcar node (or let 'manifests --flavor sysext' do it at first boot):
  /opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw  and the link
  /etc/extensions/kubernetes.raw -> /opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw

Offline: --binaries DIR uses files you downloaded yourself instead (kubelet, kubeadm, kubectl in
DIR or DIR/bin; optional cni-plugins*.tgz or cni/, crictl*.tar.gz or crictl).

'create containerd --containerd-version V' makes instead the containerd sysext that
'build --containerd-version V' bakes (Flatcar's sysext-bakery layout): containerd's release tarball
(--github-mirror)/containerd/containerd/releases/download/vV/containerd-V-linux-ARCH.tar.gz and runc
(--github-mirror)/opencontainers/runc/releases/download/vR/runc.ARCH, each checked against its
published .sha256sum / runc.sha256sum, laid out as

  /usr/bin/{containerd,ctr,containerd-shim-runc-v2,containerd-stress,runc}
  /usr/share/containerd/config.toml   Flatcar's (imports /etc/containerd/conf.d/*.toml)
  /usr/lib/systemd/system/containerd.service, multi-user.target.d/10-containerd-service.conf
  /usr/lib/extension-release.d/extension-release.containerd   (SYSEXT_VERSION_ID=V)

On a node it replaces Flatcar's own only when that one is masked:
  /opt/extensions/containerd/containerd-V-x86-64.raw, linked as /etc/extensions/containerd.raw
  /etc/extensions/containerd-flatcar.raw -> /dev/null`,
		Example: `  # The Kubernetes sysext for x86-64 Flatcar nodes
  flatcar-capo sysext create --kubernetes-version stable

  # arm64, from local mirrors of dl.k8s.io and github.com, into a web server's directory
  flatcar-capo sysext create --kubernetes-version v1.33.4 --arch arm64 \
      --kubernetes-mirror https://mirror.example/k8s-release --github-mirror https://mirror.example/github \
      --output-file /srv/www/extensions/kubernetes-v1.33.4-arm64.raw

  # Air-gapped: from binaries downloaded elsewhere
  flatcar-capo sysext create --kubernetes-version v1.33.4 --binaries ./k8s-v1.33.4 --output-file kubernetes.raw

  # containerd 2.3.7 with the runc its release names, from a mirror in GitHub's layout
  flatcar-capo sysext create containerd --containerd-version 2.3.7 --github-mirror https://mirror.example/github`,
		Args: sysextCreateArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			net.Log = cmd.ErrOrStderr()
			if len(args) == 1 && args[0] == sysext.ContainerdName {
				return runSysextCreateContainerd(cmd, ctr, dl, net, outFile, binaries,
					sysext.CreateOptions{ReleaseID: releaseID, Compression: compression, Level: level, LevelGiven: cmd.Flags().Changed("compression-level")})
			}
			if cmd.Flags().Changed("containerd-version") || cmd.Flags().Changed("runc-version") {
				return usagef("--containerd-version and --runc-version are for 'sysext create containerd'")
			}
			made, err := sysext.MakeKubernetes(cmd.Context(), sysext.MakeOptions{
				Image:    sysext.CreateOptions{ReleaseID: releaseID, Compression: compression, Level: level, LevelGiven: cmd.Flags().Changed("compression-level")},
				Download: dl, Network: net, Binaries: binaries, OutputFile: outFile,
				DefaultCacheDir: fetch.DefaultCacheDir, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			return report(cmd, made, func(w io.Writer) error {
				name, _ := sysext.KubernetesFileName(made.Version, made.Arch)
				fmt.Fprintf(w, "Wrote %s: %s (%s of files, %s), %d entries\n", made.Path, progress.Bytes(made.Size), progress.Bytes(made.Bytes), made.Compression, len(made.Files))
				fmt.Fprintf(w, "  sha256 %s\n  sha512 %s\n", made.SHA256, made.SHA512)
				fmt.Fprintf(w, "On a node: %s/%s, linked as %s\n", sysext.KubernetesDir, name, sysext.KubernetesLink)
				return nil
			})
		},
	}
	f := cmd.Flags()
	addKubernetesFlags(f, &dl, "")
	addArchFlag(f, &dl.Arch)
	addCacheFlag(f, &dl.CacheDir)
	addNetworkFlags(f, &net)
	f.StringVar(&binaries, "binaries", "", "use the files in this directory instead of downloading (offline)")
	f.StringVar(&releaseID, "release-id", "_any", "extension-release ID: _any (as Flatcar's bakery) or flatcar (adds SYSEXT_LEVEL=1.0)")
	f.StringVar(&compression, "compression", "gzip", "squashfs compression: gzip or zstd (zstd is 6x slower through go-diskfs)")
	f.IntVar(&level, "compression-level", sysext.DefaultGzipLevel, "gzip level: 1 (fastest) to 9 (6: 7% smaller, 4x slower)")
	f.StringVar(&outFile, "output-file", "", "where to write the sysext (default: kubernetes-<version>-<arch>.raw, containerd-<version>-<arch>.raw)")
	addContainerdFlags(f, &ctr)
	addOutputFlag(f)
	return cmd
}

// sysextCreateArgs takes no argument (the Kubernetes sysext) or the sysext to make.
func sysextCreateArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 || (len(args) == 1 && args[0] != sysext.KubernetesName && args[0] != sysext.ContainerdName) {
		return usagef("%s takes one optional argument, kubernetes (the default) or containerd; got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

func runSysextCreateContainerd(cmd *cobra.Command, ctr containerd.Options, dl kubernetes.Options, net httpx.Options, outFile, binaries string, image sysext.CreateOptions) error {
	if ctr.Version == "" {
		return usagef("sysext create containerd needs --containerd-version, e.g. 2.3.7")
	}
	if binaries != "" || cmd.Flags().Changed("kubernetes-version") {
		return usagef("--binaries and --kubernetes-version are for the Kubernetes sysext, not 'sysext create containerd'")
	}
	ctr.Arch, ctr.GitHubMirror, ctr.CacheDir = dl.Arch, dl.GitHubMirror, dl.CacheDir
	made, err := sysext.MakeContainerd(cmd.Context(), sysext.MakeContainerdOptions{Image: image, Download: ctr, Network: net,
		OutputFile: outFile, DefaultCacheDir: fetch.DefaultCacheDir, Log: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	return report(cmd, made, func(w io.Writer) error {
		name, _ := sysext.ContainerdFileName(made.Version, made.Arch)
		fmt.Fprintf(w, "Wrote %s: %s (%s of files, %s), %d entries\n", made.Path, progress.Bytes(made.Size), progress.Bytes(made.Bytes), made.Compression, len(made.Files))
		fmt.Fprintf(w, "  sha256 %s\n  sha512 %s\n", made.SHA256, made.SHA512)
		fmt.Fprintf(w, "On a node: %s, linked as %s, with %s -> /dev/null (masks Flatcar's own)\n", node.ExtensionFile(sysext.ContainerdName, name), sysext.ContainerdLink, sysext.ContainerdMask)
		return nil
	})
}

func newSysextInspectCommand() *cobra.Command {
	var (
		name, osRelease, arch string
		noVerify              bool
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a sysext's extension-release and files, and whether Flatcar would merge it",
		Long: `Reads a sysext image (squashfs) without mounting it and reports its extension-release, its
files with owner and mode, and whether systemd-sysext would merge it on Flatcar, with the reason.

NAME is what the image will be linked as in /etc/extensions (NAME.raw), which must match its
extension-release.NAME. Default: the file name without .raw; a versioned file such as
kubernetes-v1.33.4-x86-64.raw counts as "kubernetes" when it carries extension-release.kubernetes.

The host is Flatcar's constants (ID=flatcar, SYSEXT_LEVEL=1.0, --arch) unless --os-release names
an os-release file to compare with. All file data is decompressed to find corruption, unless
--no-verify.

Exits 1 when Flatcar would not merge it (no or mismatched extension-release, a usr/lib/os-release,
an incompatible ID/SYSEXT_LEVEL/ARCHITECTURE) or the file is truncated or corrupt.`,
		Example: `  flatcar-capo sysext inspect kubernetes-v1.33.4-x86-64.raw
  flatcar-capo sysext inspect /srv/extensions/k8s.raw --name kubernetes -o json | jq .wouldMerge
  flatcar-capo sysext inspect kubernetes.raw --os-release ./usr/lib/os-release --arch arm64`,
		Args: exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sysext.Inspect(args[0], sysext.InspectOptions{Name: name, OSRelease: osRelease, Arch: arch, Verify: !noVerify})
			if err != nil {
				return err
			}
			if err := report(cmd, r, func(w io.Writer) error { return printSysextReport(w, r) }); err != nil {
				return err
			}
			if !r.WouldMerge {
				return fmt.Errorf("%s would not be merged as %s.raw: %s", args[0], r.Name, r.Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "NAME the image will be linked as (/etc/extensions/NAME.raw); default: from the file name")
	f.StringVar(&osRelease, "os-release", "", "compare with this os-release file instead of Flatcar's constants")
	f.StringVar(&arch, "arch", "amd64", "host architecture: amd64 (x86-64) or arm64")
	f.BoolVar(&noVerify, "no-verify", false, "do not decompress the file data (faster; misses corrupt data blocks)")
	addOutputFlag(f)
	return cmd
}

func printSysextReport(w io.Writer, r *sysext.Report) error {
	fmt.Fprintf(w, "File:        %s (%s, squashfs %s, %d KiB blocks, created %s)\n", r.Path, progress.Bytes(r.Size), r.Compression, r.BlockSize>>10, r.Created.Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(w, "Name:        %s (linked as /etc/extensions/%s.raw)\n", r.Name, r.Name)
	if len(r.ReleaseNames) == 0 {
		fmt.Fprintln(w, "Release:     none")
	}
	for _, n := range r.ReleaseNames {
		fmt.Fprintf(w, "Release:     %s\n", sysext.ReleasePath(n))
		for _, l := range strings.Split(strings.TrimSpace(string(r.Releases[n].Format("ID", "SYSEXT_LEVEL", "VERSION_ID", "ARCHITECTURE"))), "\n") {
			if l != "" {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
	fmt.Fprintf(w, "Files:       %d entries, %s\n", len(r.Files), progress.Bytes(r.Bytes))
	for _, e := range r.Files {
		target := ""
		if e.Target != "" {
			target = " -> " + e.Target
		}
		fmt.Fprintf(w, "  %s %d/%d %10d  /%s%s\n", e.Mode, e.UID, e.GID, e.Size, e.Path, target)
	}
	for _, i := range r.Ignored {
		fmt.Fprintf(w, "Note:        %s is not merged (systemd-sysext merges /usr and /opt only)\n", i)
	}
	if n := len(r.NotRoot); n > 0 {
		fmt.Fprintf(w, "Note:        %d entries are not owned by root, e.g. %s: a user could replace what runs from /usr (make sysexts with -all-root)\n", n, r.NotRoot[0])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "Problem:     %s\n", p)
	}
	data := "not checked (--no-verify)"
	if r.Verified {
		data = "all file data decompressed without error"
	}
	fmt.Fprintf(w, "Data:        %s\n", data)
	verdict := map[bool]string{true: "yes", false: "NO"}[r.WouldMerge]
	fmt.Fprintf(w, "Would merge: %s, against %s: %s\n", verdict, r.Host.Source, r.Reason)
	return nil
}
