package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

func newFetchCommand() *cobra.Command {
	var (
		rf                      releaseFlags
		compression, outputFile string
		cacheDir                string
		vf                      verifyFlags
		quiet                   bool
	)
	cmd := &cobra.Command{
		Use:   "fetch",
		Short: "Download, verify (OpenPGP + SHA512) and decompress a Flatcar release image",
		Long: `Download flatcar_production_<image>_image.img (a qcow2) of a release, or its .img.bz2 when the
server has no .img (releases before 3602.2.0) or --compression bz2 is given, and write the image as
published to --output-file (default flatcar-<channel>-<version>-<image>.img here).

Verification is on by default: the clear-signed <file>.DIGESTS.asc must carry a valid signature of
Flatcar's image signing key (embedded; --keyring replaces it) and the SHA512 of the download,
computed while it streams in, must match it before the output is renamed into place. A signature
made while its subkey was valid stays valid after the subkey expires; revoked keys are rejected.

The network bytes are hashed, decoded and written in one pass and also kept in the cache
(--cache-dir, default $XDG_CACHE_HOME/flatcar-capo): a second fetch of the same version downloads
no image, and an interrupted download resumes with an HTTP Range request. Cached files are
re-verified (signature and SHA512) on every use.`,
		Example: `  flatcar-capo fetch --channel stable
  flatcar-capo fetch --version 4230.2.3 --image openstack --output-file flatcar.img
  flatcar-capo fetch --release-server http://mirror.example/flatcar/{channel} -o json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			pmode := progress.Auto
			if quiet {
				pmode = progress.Quiet
			}
			rf.net.Log = notes(cmd, quiet)
			res, err := fetch.FetchRelease(cmd.Context(), fetch.Request{Network: rf.net, KeyringFile: vf.keyring,
				Options: fetch.Options{Release: rf.rel, Image: rf.image, Compression: compression, OutputFile: outputFile,
					CacheDir: cacheDir, InsecureSkipVerify: vf.insecure, Progress: progress.To(cmd.ErrOrStderr(), pmode), Log: cmd.ErrOrStderr()}})
			if err != nil {
				return err
			}
			return report(cmd, res, func(w io.Writer) error {
				how := "NOT verified (--insecure-skip-verify)"
				if res.Verified {
					how = "verified: OpenPGP key " + res.Signature.KeyID + " + SHA512"
				}
				var from []string
				if res.Cached {
					from = append(from, "from cache")
				}
				if res.Compression == "bz2" {
					from = append(from, "decompressed from .bz2")
				}
				extra := ""
				if len(from) > 0 {
					extra = ", " + strings.Join(from, ", ")
				}
				_, err := fmt.Fprintf(w, "%s: Flatcar %s %s (%s, %s image, %s; %s%s)\n", res.File, res.Channel, res.Version,
					res.Arch, res.Image, progress.Bytes(res.Bytes), how, extra)
				return err
			})
		},
	}
	f := cmd.Flags()
	addReleaseImageFlags(f, &rf)
	f.StringVar(&compression, "compression", fetch.CompressionAuto, "download: auto (.img, else .img.bz2 on 404), none (.img) or bz2 (.img.bz2)")
	f.StringVar(&outputFile, "output-file", "", "where to write the image (default flatcar-<channel>-<version>-<image>.img)")
	addCacheFlag(f, &cacheDir)
	addVerifyFlags(f, &vf)
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	addOutputFlag(f)
	return cmd
}
