package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

func newBuildCommand() *cobra.Command {
	var (
		o        imagebuild.Options
		vf       verifyFlags
		diskSize string
		sign     signFlags
	)
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build a CAPO-ready Flatcar image: fetch, install Kubernetes (Packer + QEMU), set the OEM, convert, upload",
		Long: `Builds a Flatcar image that Cluster API Provider OpenStack can boot as a Kubernetes node, in one
command that chains the steps the other commands do one at a time:

  resolve + fetch   the release image, verified (OpenPGP + SHA512) and cached as 'fetch' does;
                    --base-image uses a local raw or qcow2 image instead
  work copy         a sparse raw copy (--method sysext: a copy-on-write overlay, nothing copied);
                    the download is never modified
  kubernetes        kubeadm, kubelet, kubectl, crictl and the CNI plugins, downloaded on this host and
                    checked against their .sha256 before anything boots (--kubernetes-mirror,
                    --github-mirror for air-gapped sites)
  packer            (--method packer) boots the copy under Packer + QEMU with a per-build user and key
                    (Ignition through fw_cfg for --base qemu, a config-2 drive for --base openstack),
                    installs the binaries into /opt/bin and /opt/cni/bin, kubelet.service with its kubeadm
                    drop-in, containerd with the systemd cgroup driver, runs --provision scripts, then
                    sysprep (no config.ign, machine-id, SSH host keys or build user; first_boot set;
                    update-engine and locksmithd masked unless --keep-updates) and shuts down
  oem + inspect     flatcar.oem.id=--oem, autologin removed; the build fails if 'inspect' says NOT READY
  qcow2 + record    <output-dir>/<image name>.qcow2 and its .build.json (what 'upload' reads)
  upload            to each --cloud, named flatcar-<channel>-<version>-kube-<k8s> unless --image-name

--kubernetes-version stable (the default) reads release/stable.txt of --kubernetes-mirror, a minor
such as 1.36 reads release/stable-1.36.txt; the exact version found names the image and goes into
the record, and a re-run that finds the same one reuses the artifact.

One line per step with its time goes to stderr; the image name and the 'manifests' command to
stdout (-o json: the build record). A re-run with the same inputs reuses the finished artifact
(--force rebuilds). --dry-run prints the plan and boots nothing. Ctrl-C stops Packer and QEMU and
removes temporary files and the half-built image (exit 130).

--method sysext is reproducible: the same inputs give the same qcow2, byte for byte (UUIDs, hash
seeds and times come from the base image, or from SOURCE_DATE_EPOCH), so another runner's upload
reuses the Glance image. --method packer cannot promise that: the build VM writes as it runs.
After a kill -9, the next build in the output directory removes what the dead run left.
On failure, -o json writes {"error": ..., "exitCode": N, "left": [...]} to stdout.

--sign-key KEY writes NAME.qcow2.sig, NAME.qcow2.build.json.sig and the SBOM's .sig (cosign
blob signatures; check them with flatcar-capo verify or cosign verify-blob --key) and, with
--cloud and --sign-cert-uuid or --sign-cert, signs the upload for Glance's signature verification
(img_signature*, as upload --help says).

Needs packer (1.6.6, or >= 1.10 with the qemu plugin) and qemu-system-* for --method packer.`,
		Example: `  flatcar-capo build --channel stable --kubernetes-version 1.36 --cloud mycloud
  flatcar-capo build --base openstack --dry-run -o json
  flatcar-capo build --base-image flatcar_production_qemu_image.img --version 4459.2.0 --provision ./extra.sh`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ToolVersion = Version
			o.Log = cmd.ErrOrStderr()
			if err := checkBuildFlags(&o, vf, diskSize); err != nil {
				return err
			}
			var err error
			if o.SignKey, o.GlanceSigning, err = sign.signing(len(o.Clouds) > 0); err != nil {
				return err
			}
			rec, err := imagebuild.Run(cmd.Context(), &o)
			if err != nil {
				return err
			}
			return report(cmd, rec, func(w io.Writer) error { return printBuild(w, rec) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Method, "method", imagebuild.MethodPacker, "packer (boot a VM, install Kubernetes) or sysext (bake a Kubernetes sysext, no VM)")
	addReleaseFlags(f, &o.Release)
	addNetworkFlags(f, &o.Network)
	addVerifyFlags(f, &vf)
	addCacheFlag(f, &o.CacheDir)
	f.StringVar(&o.Base, "base", "", "base image to start from (fetch --image): qemu (default for packer; Ignition via fw_cfg) or openstack (config-2 drive; default for sysext)")
	f.StringVar(&o.BaseImage, "base-image", "", "use this local raw or qcow2 Flatcar image instead of downloading one")
	f.StringVar(&o.OEM, "oem", imagebuild.DefaultOEM, "OEM id of the output (flatcar.oem.id)")
	addKubernetesFlags(f, &o.Kubernetes, kubernetes.DefaultVersion)
	addContainerdFlags(f, &o.Containerd)
	f.StringArrayVar(&o.Provision, "provision", nil, "your own shell script, run in the guest after ours (repeatable)")
	f.StringArrayVar(&o.Sysext, "sysext", nil, "--method sysext: a prebuilt Kubernetes sysext FILE or URL instead of making one (repeatable)")
	f.BoolVar(&o.KeepUpdates, "keep-updates", false, "do not mask update-engine and locksmithd")
	f.BoolVar(&o.Node.KeepUSBStorage, "keep-usb-storage", false, "keep USB storage on (by default "+node.USBStorageConf+" turns it off, as image-builder does on Flatcar)")
	f.StringArrayVar(&o.Node.EnableSysext, "enable-sysext", nil, "enable one of Flatcar's official extensions, e.g. zfs, podman, nvidia-drivers-570 ("+node.EnabledSysextConf+"; repeatable)")
	f.StringVar(&o.Node.ReleaseFileServer, "release-file-server", "", "URL of your mirror of Flatcar's release server: the official extensions come from it ("+node.ReleaseFileServerArg+"=URL on the kernel command line)")
	f.BoolVar(&o.Images.NoPreload, "no-preload-images", false, "do not preload kubeadm's container images (containerd settings are still written)")
	f.StringArrayVar(&o.Images.Refs, "image", nil, "preload this image too, e.g. a CNI's or the cloud-controller-manager's (repeatable)")
	f.StringVar(&o.Images.File, "images-file", "", "preload the images listed in FILE (one ref per line, # comments)")
	f.StringVar(&o.Images.Repository, "image-repository", "", "kubeadm's --image-repository: its images are listed and preloaded under this repository")
	f.StringArrayVar(&o.Images.Mirrors, "registry-mirror", nil, "pull from, and point the node's containerd at, a mirror: REGISTRY=URL or *=URL; repeat it for several mirrors, tried in the order given;\n"+
		"REGISTRY is host[:port] or *; a path-prefixed mirror (Harbor proxy-cache project) is https://harbor.example/v2/PROJECT (containerd's override_path)")
	f.BoolVar(&o.Images.MirrorOnly, "registry-mirror-only", false, "the node's containerd uses only the mirrors, never the registry itself as the last try (air-gapped)")
	f.BoolVar(&o.Images.NodeAuth, "node-registry-auth", false, "give the node's containerd the docker config's login for each mirror (or registry): a secret in the image (root-only drop-in, image 0600); hosts.toml cannot hold one")
	f.StringVar(&o.Images.CAFile, "registry-ca", "", "PEM CA that signed the registries' or mirrors' certificates (trusted here and on the node)")
	f.StringVar(&o.Images.HTTPProxy, "http-proxy", "", "HTTP_PROXY for the node's containerd and kubelet (a password in it goes into the image: kept root-only there, the qcow2 written 0600)")
	f.StringVar(&o.Images.HTTPSProxy, "https-proxy", "", "HTTPS_PROXY for the node's containerd and kubelet")
	f.StringVar(&o.Images.NoProxy, "no-proxy", "", "NO_PROXY additions for the node's containerd and kubelet (localhost,127.0.0.1,169.254.169.254 are always in it); add the API server and its LB, service and pod CIDRs, .svc,.cluster.local")
	f.BoolVar(&o.Compress, "compress", false, "write a compressed qcow2 (deflated in parallel; smaller upload, slower build)")
	f.StringVar(&o.Packer, "packer", "", "packer binary (default: packer on PATH)")
	f.StringVar(&o.QEMUBinary, "qemu-binary", "", "qemu-system-* binary (default: qemu-system-<arch> on PATH)")
	f.StringVar(&o.Accelerator, "accelerator", "", "kvm or tcg (default: kvm when usable, else tcg with a warning)")
	f.IntVar(&o.CPUs, "cpus", imagebuild.DefaultCPUs, "build VM CPUs")
	f.IntVar(&o.MemoryMiB, "memory", imagebuild.DefaultMemory, "build VM memory in MiB")
	f.StringVar(&diskSize, "disk-size", "", "grow the image to this size (e.g. 20G, 20GiB, bytes); default: the base image's size")
	f.StringVar(&o.OutputDir, "output-dir", "", "where the image and its record go (default ./output/<image name>)")
	f.StringVar(&o.ImageName, "image-name", "", "image and Glance name (default flatcar-<channel>-<version>-kube-<k8s>)")
	f.StringArrayVar(&o.Clouds, "cloud", nil, "upload to this cloud of clouds.yaml (repeatable)")
	f.StringVar(&o.OnExists, "on-exists", string(glance.Reuse), "when the Glance name exists: reuse, replace or fail")
	f.StringArrayVar(&o.Properties, "property", nil, "extra or overriding Glance property KEY=VALUE (repeatable), as upload")
	f.StringArrayVar(&o.Tags, "tag", nil, "extra Glance tag (repeatable)")
	f.StringVar(&o.Visibility, "visibility", "", "Glance visibility: private, shared, community or public (default: Glance's)")
	f.StringVar(&o.DiskFormat, "disk-format", "qcow2", "Glance disk_format: qcow2, or raw for Ceph-backed Glance (the qcow2's disk streamed as raw)")
	f.BoolVar(&o.Force, "force", false, "rebuild even when a finished artifact with the same inputs exists")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the resolved plan; download, boot and write nothing")
	sign.register(f)
	addOutputFlag(f)
	return cmd
}

// checkBuildFlags maps the flags that need parsing to o, lets o.Validate check everything, and
// fills the keyring and cache.
func checkBuildFlags(o *imagebuild.Options, vf verifyFlags, diskSize string) error {
	if diskSize != "" {
		n, err := imagebuild.ParseDiskSize(diskSize)
		if err != nil {
			return err
		}
		o.DiskSize = n
	}
	if err := o.Validate(); err != nil {
		return err
	}
	o.InsecureSkipVerify = vf.insecure
	var err error
	if o.Keyring, err = verify.KeyringInForce(vf.keyring, vf.insecure); err != nil {
		return err
	}
	if o.CacheDir == "" {
		o.CacheDir, err = fetch.DefaultCacheDir()
	}
	return err
}

func printBuild(w io.Writer, r *imagebuild.Result) error {
	if r.Plan != nil {
		return printPlan(w, r)
	}
	state := "built"
	if r.Reused {
		state = "reused (same inputs; --force rebuilds)"
	}
	fmt.Fprintf(w, "Image %s %s\n", r.ImageName, state)
	for _, a := range r.Artifacts {
		fmt.Fprintf(w, "  %s  sha512 %s...\n", a.File, a.SHA512[:16])
	}
	if r.Base.MBRReplaced {
		fmt.Fprintf(w, "  the base's hybrid MBR replaced with a protective MBR (Glance 2026.2 and Nova refuse a hybrid one)\n")
	}
	for _, g := range r.Glance {
		fmt.Fprintf(w, "  Glance %s: %s (%s)\n", g.Cloud, g.ID, g.Action)
	}
	fmt.Fprintf(w, "\nFor CAPO manifests (flavor %s):\n  OPENSTACK_FLATCAR_IMAGE_NAME=%s\n  KUBERNETES_VERSION=%s\n  %s\n",
		r.Flavor, r.ImageName, r.KubernetesVersion, r.Manifests)
	return nil
}

func printPlan(w io.Writer, r *imagebuild.Result) error {
	p := r.Plan
	fmt.Fprintf(w, "Plan (--dry-run: nothing downloaded, booted or written)\n")
	fmt.Fprintf(w, "  method:      %s\n", p.Method)
	fmt.Fprintf(w, "  flatcar:     %s %s (%s)\n", p.Channel, p.FlatcarVersion, p.Arch)
	if p.BaseImage != "" {
		fmt.Fprintf(w, "  base image:  %s\n", p.BaseImage)
	} else {
		fmt.Fprintf(w, "  base image:  %s (%s)\n", p.BaseURL, p.Base)
	}
	fmt.Fprintf(w, "  oem:         %s\n", p.OEM)
	k8s := p.KubernetesVersion
	if p.KubernetesRequested != "" {
		k8s += " (--kubernetes-version " + p.KubernetesRequested + ")"
	}
	if p.KubernetesFrom != "" {
		k8s += " (" + p.KubernetesFrom + ")"
	}
	fmt.Fprintf(w, "  kubernetes:  %s, crictl %s, CNI %s\n", k8s, p.CrictlVersion, p.CNIVersion)
	for _, d := range p.Downloads {
		fmt.Fprintf(w, "    %-16s %s (+ .sha256)\n", d.Name, d.URL)
	}
	fmt.Fprintf(w, "  image name:  %s\n  artifact:    %s\n", p.ImageName, p.Artifact)
	if len(p.Clouds) > 0 {
		fmt.Fprintf(w, "  upload to:   %s\n", strings.Join(p.Clouds, ", "))
	}
	if len(p.Signed) > 0 {
		glanceNote := ""
		if p.GlanceSigned {
			glanceNote = " (and the upload signed for Glance)"
		}
		fmt.Fprintf(w, "  signatures:  %s%s\n", strings.Join(p.Signed, ", "), glanceNote)
	}
	if p.Images != nil {
		for _, l := range p.Images.Lines() {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, l := range p.Node.Lines() {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if mp, ok := p.MethodPlan.(interface{ Lines() []string }); ok {
		for _, l := range mp.Lines() {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "  manifests:   %s\n", r.Manifests)
	return nil
}
