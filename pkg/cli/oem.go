package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

func newOEMCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "oem",
		Short: "Show or set the OEM settings (flatcar.oem.id, kernel arguments) of a Flatcar image",
		Long: `Flatcar's GRUB sources grub.cfg from the OEM partition and boots the kernel with
"flatcar.oem.id=$oem_id $linux_append". Without flatcar.oem.id=openstack, Ignition and
coreos-metadata do not read OpenStack metadata and Nova user-data is ignored.

These commands read and edit that file directly in the image file, with pure Go: no root,
no mount, no guestfish. Both btrfs (Flatcar 2983.x and later) and ext4 OEM partitions work.`,
	}
	cmd.AddCommand(newOEMSetCommand(), newOEMShowCommand())
	return cmd
}

func newOEMSetCommand() *cobra.Command {
	var (
		opts   oem.SetOptions
		output oem.Output
		to     string
	)
	cmd := &cobra.Command{
		Use:   "set IMAGE --id OEM_ID",
		Short: "Set the OEM id and kernel arguments in the image's OEM grub.cfg",
		Long: `Sets oem_id (and optionally extra kernel arguments in linux_append) in the OEM partition's
grub.cfg, keeping every other line and comment. flatcar.autologin (a root shell on the console)
is removed unless --keep-autologin. oem-release and the sysext files are left alone: changing them
without shipping the matching oem-<id> sysext makes the initrd download it at boot.

IMAGE is changed IN PLACE unless --output-file is given; then IMAGE is untouched and OUT is a
sparse copy with the new settings, raw or qcow2 (by its extension or --to). A qcow2 IMAGE (such as
Flatcar's downloaded .img) needs --output-file. Running the command twice changes nothing the
second time.`,
		Example: `  # Retarget a qemu image to OpenStack, in place
  flatcar-capo oem set flatcar_production_qemu_image.raw --id openstack

  # Keep the original; write a patched copy and add a kernel argument
  flatcar-capo oem set flatcar.raw --id openstack --linux-append "console=ttyS0,115200n8" --output-file flatcar-openstack.raw

  # Retarget a downloaded (qcow2) image straight into a qcow2 for Glance
  flatcar-capo oem set flatcar_production_qemu_image.img --id openstack --output-file flatcar-openstack.qcow2

  # Older Flatcar (before 4459.2.0) has a hybrid MBR that newer Nova rejects
  flatcar-capo oem set flatcar.raw --id openstack --protective-mbr`,
		Args: exactArgs(1, "IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			output.Format = disk.Format(to)
			res, err := oem.SetFile(cmd.Context(), args[0], output, opts)
			if err != nil {
				return err
			}
			return report(cmd, res, func(w io.Writer) error {
				what := "already has these settings; nothing changed"
				switch {
				case res.Created:
					what = "grub.cfg created"
				case res.Changed:
					what = "grub.cfg updated"
				}
				fmt.Fprintf(w, "%s: OEM partition %d (%s): %s\n", filepath.Clean(res.Image), res.Partition, res.Filesystem, what)
				fmt.Fprintf(w, "  oem_id:       %q -> %q\n", res.Before.OEMID, res.After.OEMID)
				fmt.Fprintf(w, "  linux_append: %q -> %q\n", res.Before.LinuxAppend, res.After.LinuxAppend)
				if res.MBRReplaced {
					fmt.Fprintln(w, "  hybrid MBR replaced with a protective MBR")
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ID, "id", "", "OEM id to set, e.g. openstack (becomes flatcar.oem.id on the kernel command line)")
	f.StringVar(&opts.LinuxAppend, "linux-append", "", "extra kernel arguments, space separated, added to linux_append without duplicates")
	f.BoolVar(&opts.KeepAutologin, "keep-autologin", false, "keep flatcar.autologin (console root shell) in linux_append")
	f.BoolVar(&opts.AllowUnknownID, "allow-unknown-id", false, "accept an OEM id that is not in Flatcar's list")
	f.BoolVar(&opts.ProtectiveMBR, "protective-mbr", false, "replace a hybrid MBR (Flatcar < 4459.2.0) with a standard protective MBR, as newer Nova requires")
	f.StringVar(&output.Path, "output-file", "", "write a patched sparse copy to this path and leave IMAGE untouched (required for qcow2 input)")
	f.StringVar(&to, "to", "", "format of --output-file: qcow2 or raw (default: from its extension, .qcow2/.raw/.bin, else the input's format)")
	f.BoolVar(&output.Compress, "compress", false, "compress the clusters of a qcow2 --output-file")
	addOutputFlag(f)
	return cmd
}

func newOEMShowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show IMAGE",
		Short: "Show the OEM settings GRUB will use (oem_id, linux_append, linux_console)",
		Long: `Reads the OEM partition's grub.cfg the way GRUB sources it (the last assignment wins) and
prints the effective settings, the OEM filesystem type and oem-release's ID. Raw and qcow2 images.`,
		Example: `  flatcar-capo oem show flatcar.raw
  flatcar-capo oem show flatcar.raw -o json | jq -r .settings.oem_id`,
		Args: exactArgs(1, "IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := disk.Open(args[0], false)
			if err != nil {
				return err
			}
			defer img.Close()
			st, _, err := oem.ReadState(img)
			if err != nil {
				return err
			}
			return report(cmd, st, func(w io.Writer) error {
				fmt.Fprintf(w, "OEM partition:  %d (%s)\n", st.Partition, st.Filesystem)
				if !st.GrubCfg {
					fmt.Fprintln(w, "grub.cfg:       missing (flatcar.oem.id will be empty)")
				}
				fmt.Fprintf(w, "oem_id:         %s\n", st.Settings.OEMID)
				fmt.Fprintf(w, "linux_append:   %s\n", st.Settings.LinuxAppend)
				fmt.Fprintf(w, "linux_console:  %s\n", st.Settings.LinuxConsole)
				fmt.Fprintf(w, "oem-release ID: %s\n", st.OEMReleaseID)
				return nil
			})
		},
	}
	addOutputFlag(cmd.Flags())
	return cmd
}
