package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
	"github.com/flatcar-capo/flatcar-capo/pkg/verify"
)

func newVerifyCommand() *cobra.Command {
	var keyPath string
	cmd := &cobra.Command{
		Use:   "verify ARTIFACT --key PUB",
		Short: "Check the detached signatures build --sign-key wrote for an image, its record and its SBOM",
		Long: `Checks, offline, what build --sign-key signed for ARTIFACT: ARTIFACT.sig, ARTIFACT.build.json.sig
and, when the record names an SBOM, its .sig, each with the public key PUB (a PEM PUBLIC KEY, as
openssl pkey -pubout writes it, or a PEM certificate). It also checks that ARTIFACT is the image
its signed record describes (its sha512), and reads the image (as inspect --sbom-file does) to
check that it holds what the signed SBOM says: the SBOM's sha256 is the record's, each sysext's
sha512, each /opt/bin and /opt/cni/bin file the SBOM lists (sha256) and every preloaded image
digest. A mismatch names the component and both values. ARTIFACT's file name must be the one
the record gives (a signed image copied over another image's name fails), and verify prints the
record's image name and versions. When a signature fails, the contents are not read.

The signatures are cosign's blob signatures (base64 of an ASN.1 ECDSA or RSA PKCS#1 v1.5
signature over the file's SHA-256), so cosign checks the same files without flatcar-capo:

  cosign verify-blob --key PUB --signature ARTIFACT.sig --insecure-ignore-tlog ARTIFACT

Exit 0 when everything verifies, 1 when a signature, the image or its contents do not, 2 for unusable input
(no record, an unreadable key).`,
		Example: `  flatcar-capo verify output/flatcar-k8s/flatcar-k8s.qcow2 --key signing.pub
  flatcar-capo verify flatcar-k8s.qcow2 --key signing.pub -o json`,
		Args: exactArgs(1, "ARTIFACT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return errs.Invalidf("--key is required: the public key of the --sign-key that signed the image")
			}
			pub, err := signing.LoadPublicKey(keyPath, "--key")
			if err != nil {
				return err
			}
			v, err := verify.Artifact(cmd.Context(), args[0], pub)
			if err != nil {
				return err
			}
			if err := report(cmd, v, func(w io.Writer) error {
				fmt.Fprintf(w, "image: %s (the signed record's: Flatcar %s, Kubernetes %s, method %s)\n", v.ImageName, v.FlatcarVersion, v.KubernetesVersion, v.Method)
				for _, f := range v.Files {
					verdict := "verified"
					if !f.OK {
						verdict = "FAILED: " + f.Problem
					}
					fmt.Fprintf(w, "%s: %s\n", f.File, verdict)
				}
				for _, m := range v.Mismatches {
					fmt.Fprintf(w, "MISMATCH %s\n", m)
				}
				if v.ContentsError != "" {
					fmt.Fprintf(w, "contents: FAILED: %s\n", v.ContentsError)
				} else if len(v.Mismatches) == 0 && v.ContentsChecked > 0 {
					fmt.Fprintf(w, "contents: the image holds what the SBOM lists (%d components checked)\n", v.ContentsChecked)
				}
				for _, n := range v.Notes {
					fmt.Fprintf(w, "note: %s\n", n)
				}
				return nil
			}); err != nil {
				return err
			}
			if !v.OK {
				return errors.New("verification failed: " + v.Problems())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "PEM public key (or certificate) of the signing key")
	addOutputFlag(cmd.Flags())
	return cmd
}
