package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
)

func init() { register(newOEMCommand) }

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
		output outputOptions
		to     string
		out    OutputFormat
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
		Args: ExactArgs(1, "IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("id") && opts.ID == "" {
				return Usagef("--id is required, e.g. --id openstack (Flatcar's OEM ids: %s)", joinIDs())
			}
			if _, err := opts.Validate(); err != nil {
				return AsUsage(err)
			}
			output.to = disk.Format(to)
			res, err := setOEM(cmd.Context(), args[0], output, opts)
			if err != nil {
				return err
			}
			return Report(cmd, out, res, func(w io.Writer) error { return printSetResult(w, res) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ID, "id", "", "OEM id to set, e.g. openstack (becomes flatcar.oem.id on the kernel command line)")
	f.StringVar(&opts.LinuxAppend, "linux-append", "", "extra kernel arguments, space separated, added to linux_append without duplicates")
	f.BoolVar(&opts.KeepAutologin, "keep-autologin", false, "keep flatcar.autologin (console root shell) in linux_append")
	f.BoolVar(&opts.AllowUnknownID, "allow-unknown-id", false, "accept an OEM id that is not in Flatcar's list")
	f.BoolVar(&opts.ProtectiveMBR, "protective-mbr", false, "replace a hybrid MBR (Flatcar < 4459.2.0) with a standard protective MBR, as newer Nova requires")
	f.StringVar(&output.path, "output-file", "", "write a patched sparse copy to this path and leave IMAGE untouched (required for qcow2 input)")
	f.StringVar(&to, "to", "", "format of --output-file: qcow2 or raw (default: from its extension, .qcow2/.raw/.bin, else the input's format)")
	f.BoolVar(&output.compress, "compress", false, "compress the clusters of a qcow2 --output-file")
	AddOutputFlag(f, &out)
	return cmd
}

func joinIDs() string {
	s := ""
	for i, id := range oem.KnownIDs {
		if i > 0 {
			s += ", "
		}
		s += id
	}
	return s
}

// outputOptions say where `oem set --output-file` writes and in which format.
type outputOptions struct {
	path     string
	to       disk.Format
	compress bool
}

// setOEM edits image in place, or writes an edited copy to out.path (raw or qcow2).
func setOEM(ctx context.Context, image string, out outputOptions, opts oem.SetOptions) (oem.SetResult, error) {
	if out.path == "" {
		img, err := disk.Open(image, true)
		if err != nil {
			return oem.SetResult{}, err
		}
		res, err := oem.Set(img, opts)
		if cerr := img.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", image, cerr)
		}
		return res, err
	}
	if same, _ := sameFile(image, out.path); same {
		return oem.SetResult{}, Usagef("--output-file %s is IMAGE itself; omit --output-file to edit in place", out.path)
	}
	src, err := disk.Open(image, false)
	if err != nil {
		return oem.SetResult{}, err
	}
	defer src.Close()
	format, err := convert.OutputFormat(out.path, out.to)
	if err != nil {
		if out.to != "" {
			return oem.SetResult{}, AsUsage(err)
		}
		format = src.Format // an ambiguous name (.img) keeps the input's format
	}
	if out.compress && format != disk.FormatQcow2 {
		return oem.SetResult{}, Usagef("--compress needs qcow2 output; %s will be %s", out.path, format)
	}
	// The edit happens on a sparse raw work copy next to the output; it becomes the output
	// (raw) or is streamed into it (qcow2), and never lingers after a failure.
	work, err := atomicfile.Create(out.path)
	if err != nil {
		return oem.SetResult{}, err
	}
	defer work.Abort()
	if r := src.Qcow2(); r != nil {
		err = qcow2.CopyToRaw(ctx, r, work.File, 0, nil)
	} else {
		err = disk.CopySparse(ctx, work.File, src.File())
	}
	if err != nil {
		return oem.SetResult{}, fmt.Errorf("copying %s to %s: %w", image, out.path, err)
	}
	img, err := disk.Open(work.Name(), true)
	if err != nil {
		return oem.SetResult{}, err
	}
	img.Path = out.path
	res, err := oem.Set(img, opts)
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return res, err
	}
	if format == disk.FormatRaw {
		return res, work.Commit(0o644)
	}
	rawSrc, err := qcow2.NewRawSource(work.File)
	if err != nil {
		return res, err
	}
	_, _, err = convert.Write(ctx, rawSrc, out.path, disk.FormatQcow2, convert.Options{Compress: out.compress})
	return res, err
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

func printSetResult(w io.Writer, r oem.SetResult) error {
	what := "already has these settings; nothing changed"
	switch {
	case r.Created:
		what = "grub.cfg created"
	case r.Changed:
		what = "grub.cfg updated"
	}
	fmt.Fprintf(w, "%s: OEM partition %d (%s): %s\n", filepath.Clean(r.Image), r.Partition, r.Filesystem, what)
	fmt.Fprintf(w, "  oem_id:       %q -> %q\n", r.Before.OEMID, r.After.OEMID)
	fmt.Fprintf(w, "  linux_append: %q -> %q\n", r.Before.LinuxAppend, r.After.LinuxAppend)
	if r.MBRReplaced {
		fmt.Fprintln(w, "  hybrid MBR replaced with a protective MBR")
	}
	return nil
}

func newOEMShowCommand() *cobra.Command {
	var out OutputFormat
	cmd := &cobra.Command{
		Use:   "show IMAGE",
		Short: "Show the OEM settings GRUB will use (oem_id, linux_append, linux_console)",
		Long: `Reads the OEM partition's grub.cfg the way GRUB sources it (the last assignment wins) and
prints the effective settings, the OEM filesystem type and oem-release's ID. Raw and qcow2 images.`,
		Example: `  flatcar-capo oem show flatcar.raw
  flatcar-capo oem show flatcar.raw -o json | jq -r .settings.oem_id`,
		Args: ExactArgs(1, "IMAGE"),
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
			return Report(cmd, out, st, func(w io.Writer) error {
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
	AddOutputFlag(cmd.Flags(), &out)
	return cmd
}
