package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
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
Container Linux Config that the transpiler rejects (an error) or warns about (a warning, as CABPK
logs it and keeps the config; an error under strict: true), user-data over Nova's 64 KiB, a
KubeadmControlPlane whose format changes on a CAPI release that refuses it, and fields unknown to
the CAPI/CAPO API types. Documents of an apiVersion newer than this build's types, such as CAPO
v0.15's infrastructure.cluster.x-k8s.io/v1beta2, are reported as unchecked (a warning).

clusterctl templates are read as clusterctl fills them: every ${...} form of its envsubst
(${VAR:=default}, ${VAR%.*}, ${VAR//a/b}, ${#VAR}, ...; $$ escapes) is understood, a value is
checked as its default makes it (mask: ${FLATCAR_DISABLE_AUTO_UPDATE:=true} is the boolean true),
and a form clusterctl refuses (${VAR-default}) is an error.

To check a migration (e.g. Ubuntu to Flatcar), give the current and the desired manifests in that
order: a KubeadmControlPlane that appears in both is compared.

Exits 1 when any error-level finding is reported; warnings alone exit 0. The rules are listed
in docs/lint-rules.md.

Documents are checked one at a time, so memory stays bounded: a document over 2 MiB (more than
any Kubernetes object) and, across all files, CAPI/CAPO/ORC objects of more than 500,000 YAML
nodes (the objects of hundreds of clusters) are refused (exit 2).`,
		Example: `  flatcar-capo lint cluster.yaml
  kubectl get kcp,kubeadmconfigtemplate,openstackmachinetemplate,md -A -o yaml | flatcar-capo lint -
  flatcar-capo lint --capi-version 1.3.5 current.yaml desired.yaml -o json
  flatcar-capo lint cluster.yaml --cloud mycloud   # image filters must match exactly one image`,
		Args: minimumArgs(1, "FILE..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := capo.LintFiles(cmd.Context(), capo.LintRequest{Files: args, CAPIVersion: capiVersion, Cloud: cloud, Record: record,
				Stdin: func() ([]byte, error) { return readStdin(cmd.Context(), cmd.InOrStdin(), infile.Manifest) }})
			if err != nil {
				return err
			}
			if err := report(cmd, rep, rep.WriteText); err != nil {
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
	addOutputFlag(cmd.Flags())
	return cmd
}
