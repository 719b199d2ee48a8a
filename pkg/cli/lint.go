package cli

import (
	"context"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

func newLintCommand() *cobra.Command {
	var (
		capiVersion string
		cloud       string
		record      string
	)
	cmd := &cobra.Command{
		Use:   "lint FILE...",
		Short: "Find the Ignition and Flatcar pitfalls in CAPO cluster manifests",
		Long: `Reads cluster manifests (multi-document YAML; '-' is stdin; CAPI v1beta1/v1beta2 and CAPO
v1alpha5 to v1beta1 documents) and reports, with the file, line, document and field path and the
fix: a Flatcar image with cloud-config bootstrap data, useExperimentalRetryJoin or gzip files with
Ignition, base64 files on CAPI before 1.2.0, kubeadm.service not ordered after containerd, node
name or providerID not from coreos-metadata, a missing EnvironmentFile=/run/metadata/flatcar,
Container Linux Config that the transpiler rejects or warns about (CABPK drops it silently with
strict: false), user-data over Nova's 64 KiB, a KubeadmControlPlane whose format changes on a CAPI
release that refuses it, and fields unknown to the CAPI/CAPO API types.

To check a migration (e.g. Ubuntu to Flatcar), give the current and the desired manifests in that
order: a KubeadmControlPlane that appears in both is compared.

Exits 1 when any error-level finding is reported; warnings alone exit 0. The rules are listed
in docs/lint-rules.md.`,
		Example: `  flatcar-capo lint cluster.yaml
  kubectl get kcp,kubeadmconfigtemplate,openstackmachinetemplate,md -A -o yaml | flatcar-capo lint -
  flatcar-capo lint --capi-version 1.3.5 current.yaml desired.yaml -o json
  flatcar-capo lint cluster.yaml --cloud mycloud   # image filters must match exactly one image`,
		Args: MinimumArgs(1, "FILE..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := capo.LintOptions{CAPIVersion: capiVersion}
			if err := opts.Validate(); err != nil {
				return err
			}
			inputs := make([]capo.Input, 0, len(args))
			for _, name := range args {
				var data []byte
				var err error
				if name == "-" {
					data, err = readStdin(cmd.Context(), cmd.InOrStdin(), infile.Manifest)
					name = "<stdin>"
				} else {
					data, err = infile.ReadFile("lint argument", name, infile.Manifest)
				}
				if err != nil {
					return fmt.Errorf("reading %s: %w", name, err)
				}
				inputs = append(inputs, capo.Input{Name: name, Data: data})
			}
			if cloud != "" {
				c, err := glance.Connect(cmd.Context(), cloud)
				if err != nil {
					return err
				}
				opts.Images = func(ctx context.Context, name string, tags []string) (int, error) {
					return glance.CountActiveImages(ctx, c, name, tags)
				}
				if record == "" { // the record's min_disk wins over the cloud's
					opts.ImageMinDisk = func(ctx context.Context, name string, tags []string) (int, error) {
						return glance.MinDiskOfImages(ctx, c, name, tags)
					}
				}
			}
			if record != "" {
				// min_disk as upload sets it: the virtual size of the artifact next to the record.
				artifact := strings.TrimSuffix(record, ".build.json")
				v, err := glance.VirtualSize(artifact)
				if err != nil {
					return Usagef("--from-record %s: the image next to it gives min_disk: %v", record, err)
				}
				opts.MinDiskGiB = glance.MinDiskGiB(v)
			}
			rep, err := capo.Lint(cmd.Context(), inputs, opts)
			if err != nil {
				return err
			}
			if err := Report(cmd, rep, rep.WriteText); err != nil {
				return err
			}
			if rep.Errors > 0 {
				return fmt.Errorf("%d error-level finding(s) in %d document(s)", rep.Errors, rep.Documents)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&capiVersion, "capi-version", capo.NewestCAPIVersion,
		"CAPI release the manifests are applied to (older releases have more pitfalls)")
	cmd.Flags().StringVar(&cloud, "cloud", "", "also check that every image filter matches exactly one active Glance image in this cloud (clouds.yaml name)")
	cmd.Flags().StringVar(&record, "from-record", "", "a build record (IMAGE.qcow2.build.json, its image beside it): warn when a rootVolume.sizeGiB is below the image's min_disk")
	AddOutputFlag(cmd.Flags())
	return cmd
}
