package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/inspect"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

func newInspectCommand() *cobra.Command {
	var (
		target, sbomFile, flatcarSBOM string
	)
	cmd := &cobra.Command{
		Use:   "inspect IMAGE",
		Short: "Report an image's partitions and OEM settings, and whether it is ready for a cloud",
		Long: `Reports the GPT partitions, the OEM settings GRUB will use, sysext files and markers, the
first-boot flag on the ESP, a leftover /oem/config.ign, the MBR kind, and a verdict for --for
(default: the image's own oem_id):

  READY      nothing to fix (info lines, e.g. the harmless oem-qemu sysext of a retargeted
             qemu image, are facts, not problems)
  WARNING    ready, with something worth knowing (flatcar.autologin, hybrid MBR, missing
             first-boot flag)
  NOT READY  the effective oem_id differs from the target, /oem/config.ign would override
             cloud user-data, or oem-release / an active-oem-<id> marker names an OEM sysext
             the image lacks (the initrd would download it and fail offline)

Exits 1 when NOT READY, 0 otherwise, so CI can gate on it. The JSON fields are documented in
docs/inspect-json.md and kept stable.

--sbom-file PATH writes the CycloneDX 1.6 JSON SBOM of what the image holds, for images built
elsewhere: the image file (sha512), the Flatcar version of its os-release, every sysext stored
in ROOT (sha512), every file in /opt/bin and /opt/cni/bin (sha256) and the preloaded container
images (pkg:oci with digest and platform). It is written whatever the verdict; the same image
gives the same bytes (a timestamp only from SOURCE_DATE_EPOCH). build writes a fuller one,
<artifact>.cdx.json, with sources and versions from its record.

--flatcar-sbom PATH (with --sbom-file) refers the SBOM to Flatcar's own package SBOM of the
image's release (flatcar_production_image_sbom.json, SPDX JSON, published beside the release's
images): an external reference of type "bom" on the Flatcar component with the file's name and
sha512. inspect cannot verify a local file and says so (flatcar-capo:flatcar:sbom:verified
false); build fetches it and checks it against the release's signed DIGESTS.`,
		Example: `  flatcar-capo inspect flatcar.raw --for openstack
  flatcar-capo inspect flatcar.qcow2 -o json | jq .verdict
  flatcar-capo inspect image-builder-flatcar.qcow2 --sbom-file image-builder-flatcar.cdx.json
  flatcar-capo inspect flatcar.qcow2 --sbom-file flatcar.cdx.json --flatcar-sbom flatcar_production_image_sbom.json`,
		Args: exactArgs(1, "IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := inspect.File(cmd.Context(), args[0], inspect.FileOptions{Target: target, SBOMFile: sbomFile, FlatcarSBOM: flatcarSBOM, Tool: Version})
			if err != nil {
				return err
			}
			if sbomFile != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Wrote the SBOM of %s to %s\n", r.Image, sbomFile)
			}
			if err := report(cmd, r, func(w io.Writer) error { return printInspect(w, r) }); err != nil {
				return err
			}
			if r.Verdict == inspect.NotReady {
				return fmt.Errorf("%s is NOT READY for %s", r.Image, r.Target)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "for", "", "target platform to judge against, e.g. openstack (default: the image's oem_id)")
	cmd.Flags().StringVar(&sbomFile, "sbom-file", "", "also write the CycloneDX JSON SBOM of what the image holds to PATH")
	cmd.Flags().StringVar(&flatcarSBOM, "flatcar-sbom", "", "with --sbom-file: refer to Flatcar's package SBOM of the release (flatcar_production_image_sbom.json) at PATH")
	addOutputFlag(cmd.Flags())
	return cmd
}

func printInspect(w io.Writer, r *inspect.Report) error {
	fmt.Fprintf(w, "Image:      %s (%s, %s)\n", r.Image, r.Format, progress.Bytes(r.Size))
	fmt.Fprintln(w, "Partitions:")
	for _, p := range r.Partitions {
		fmt.Fprintf(w, "  %d  %-12s %-16s %10s  %s\n", p.Number, p.Name, p.Type, progress.Bytes(p.Size), p.TypeGUID)
	}
	mbr := string(r.MBR.Kind)
	if r.MBR.Kind == disk.MBRProtective {
		mbr += " (one 0xEE entry over the disk, as Glance and Nova want)"
	}
	fmt.Fprintf(w, "MBR:        %s\n", mbr)
	fmt.Fprintf(w, "OEM:        partition %d, %s, grub.cfg %s\n", r.OEM.Partition, r.OEM.Filesystem, map[bool]string{true: "present", false: "missing"}[r.OEM.GrubCfg])
	fmt.Fprintf(w, "  oem_id:        %s\n", r.OEM.Settings.OEMID)
	fmt.Fprintf(w, "  linux_append:  %s\n", r.OEM.Settings.LinuxAppend)
	fmt.Fprintf(w, "  linux_console: %s\n", r.OEM.Settings.LinuxConsole)
	fmt.Fprintf(w, "  oem-release:   ID=%s\n", r.OEM.OEMReleaseID)
	for _, s := range r.Sysext {
		fmt.Fprintf(w, "  sysext:        %s (%s)\n", s.Name, progress.Bytes(s.Size))
	}
	for _, m := range r.Markers {
		fmt.Fprintf(w, "  marker:        %s\n", m)
	}
	fb := "unknown (ESP unreadable)"
	if r.FirstBoot != nil {
		fb = map[bool]string{true: "present", false: "missing"}[*r.FirstBoot]
	}
	fmt.Fprintf(w, "First boot: %s\n", fb)
	fmt.Fprintf(w, "config.ign: %s\n", map[bool]string{true: "present (overrides user-data!)", false: "absent"}[r.ConfigIgn])
	printExtensions(w, r.Extensions)
	printContainerd(w, r.Containerd)
	usb := "on (no /etc/modprobe.d file turns it off)"
	if r.Node.USBStorageOff {
		usb = "off (" + r.Node.USBStorageFile + ")"
	}
	fmt.Fprintf(w, "USB storage: %s\n", usb)
	if len(r.Node.EnabledSysext) > 0 {
		fmt.Fprintf(w, "Official extensions: %s (%s)\n", strings.Join(r.Node.EnabledSysext, ", "), node.EnabledSysextConf)
	}
	if r.Node.ReleaseFileServer != "" {
		fmt.Fprintf(w, "Release file server: %s (%s on the kernel command line)\n", r.Node.ReleaseFileServer, node.ReleaseFileServerArg)
	}
	fmt.Fprintf(w, "Verdict for %s: %s\n", r.Target, r.Verdict)
	for _, f := range r.Findings {
		fmt.Fprintf(w, "  %-7s %s\n", f.Level+":", f.Message)
	}
	return nil
}

// printExtensions shows the sysexts systemd-sysext would find in ROOT (pkg/inspect/sysext.go).
func printExtensions(w io.Writer, x inspect.Extensions) {
	fmt.Fprintf(w, "Extensions: ROOT %s; judged against %s\n", x.Root, x.Host.Source)
	if x.Root == "ext4" {
		fmt.Fprintf(w, "  containerd the node runs: %s\n", x.Containerd)
	}
	for _, l := range x.Links {
		to := ""
		if l.Target != "" {
			to = " -> " + l.Target
		}
		verdict := "would merge"
		switch {
		case l.Kind == "masked":
			verdict = "masked"
		case !l.Checked:
			verdict = "not checked"
		case !l.WouldMerge:
			verdict = "WOULD NOT MERGE"
		}
		fmt.Fprintf(w, "  %s%s (%s): %s: %s\n", l.Path, to, progress.Bytes(l.Size), verdict, l.Reason)
	}
	for _, s := range x.Stored {
		if !s.Linked {
			fmt.Fprintf(w, "  stored, not linked: %s (%s)\n", s.Path, progress.Bytes(s.Size))
		}
	}
}

// printContainerd shows the preloaded images and the containerd settings (pkg/inspect/images.go).
func printContainerd(w io.Writer, c inspect.Containerd) {
	if len(c.Images) == 0 && len(c.DropIns) == 0 && len(c.Registries) == 0 {
		fmt.Fprintln(w, "Containerd: no preloaded images, no settings in ROOT")
		return
	}
	archive := "imported (archive gone)"
	if c.Archive != "" {
		archive = fmt.Sprintf("%s (%s)", c.Archive, progress.Bytes(c.ArchiveBytes))
	}
	fmt.Fprintf(w, "Containerd: %d preloaded images, %s, import unit %s\n", len(c.Images), archive, map[bool]string{true: "enabled", false: "missing"}[c.ImportUnit])
	for _, im := range c.Images {
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", im.Name, im.Digest, im.Platform, progress.Bytes(im.Size))
	}
	for _, m := range c.Missing {
		fmt.Fprintf(w, "  MISSING (kubeadm %s needs it): %s\n", c.Kubernetes, m)
	}
	for _, d := range c.DropIns {
		fmt.Fprintf(w, "  drop-in: %s\n", d)
	}
	if c.SandboxImage != "" || c.ConfigPath != "" {
		fmt.Fprintf(w, "  sandbox image: %s; registry config_path: %s\n", c.SandboxImage, c.ConfigPath)
	}
	for _, h := range c.Registries {
		server := h.Server
		if server == "" {
			server = "the pulled registry itself"
		}
		fmt.Fprintf(w, "  registry %s: mirrors %v (in order), then %s; CA %v", h.Registry, h.Mirrors, server, h.CA)
		if h.OverridePath {
			fmt.Fprint(w, "; path-prefixed (override_path)")
		}
		fmt.Fprintln(w)
	}
	if p := c.Proxy; p.HTTPProxy != "" || p.HTTPSProxy != "" {
		fmt.Fprintf(w, "  proxy: HTTP_PROXY=%s HTTPS_PROXY=%s NO_PROXY=%s", p.HTTPProxy, p.HTTPSProxy, p.NoProxy)
		if p.HasPassword {
			fmt.Fprint(w, " (the image carries the proxy password)")
		}
		fmt.Fprintln(w)
	}
	if len(c.AuthHosts) > 0 {
		fmt.Fprintf(w, "  registry logins for the CRI (--node-registry-auth; the image carries them): %s\n", strings.Join(c.AuthHosts, ", "))
	}
}
