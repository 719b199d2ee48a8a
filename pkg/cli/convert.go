package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

func newConvertCommand() *cobra.Command {
	var (
		opts  convert.Options
		to    string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "convert IN OUT",
		Short: "Convert an image between qcow2 and raw, streaming and sparse-aware",
		Long: `Converts IN to OUT without qemu-img. IN's format (qcow2 or raw) is read from its header.
OUT's format is --to, else its extension: .qcow2 is qcow2, .raw and .bin are raw; anything else
(including .img, which Flatcar uses for qcow2) needs --to.

qcow2 input: versions 2 and 3 (compat 0.10 and 1.1), zlib-compressed and zero clusters, any
cluster size. Encrypted images, backing files, external data files and zstd compression are
refused. Raw output is sparse: unallocated, zero and all-zero clusters become holes.

qcow2 output: compat 1.1 (--compat 0.10 for old readers), 64 KiB clusters; holes and all-zero
clusters of the input are not stored. --compress deflates clusters on every core.

OUT is written to a temporary file next to it and renamed into place when complete.`,
		Example: `  # A downloaded Flatcar image (qcow2, despite .img) to raw
  flatcar-capo convert flatcar_production_qemu_image.img flatcar.raw

  # Raw to compressed qcow2 for Glance
  flatcar-capo convert flatcar.raw flatcar.qcow2 --compress`,
		Args: exactArgs(2, "IN", "OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.To = disk.Format(to)
			if !quiet {
				opts.Progress = progress.To(cmd.ErrOrStderr(), progress.Auto)
			}
			if err := atomicfile.CheckPath(args[1]); err != nil {
				return err
			}
			res, err := convert.File(cmd.Context(), args[0], args[1], opts)
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			return report(cmd, res, func(w io.Writer) error {
				kind := string(res.OutputFormat)
				if res.Compressed {
					kind += ", compressed"
				}
				_, err := fmt.Fprintf(w, "%s (%s) -> %s (%s): virtual size %s, %s of data, output %s, %.1fs\n",
					res.Input, res.InputFormat, res.Output, kind, progress.Bytes(res.VirtualSize),
					progress.Bytes(res.DataBytes), progress.Bytes(res.OutputBytes), res.Seconds)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "output format: qcow2 or raw (default: from OUT's extension)")
	f.BoolVar(&opts.Compress, "compress", false, "qcow2 output: deflate clusters in parallel (smaller, slower)")
	f.BoolVar(&opts.Sync, "fsync", false, "wait until the output is on disk before finishing (like running sync afterwards)")
	f.StringVar(&opts.Compat, "compat", "1.1", "qcow2 output: compat level 1.1 or 0.10")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	addOutputFlag(f)
	return cmd
}
