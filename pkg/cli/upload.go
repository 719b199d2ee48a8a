package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

func newUploadCommand() *cobra.Command {
	var (
		name, visibility       string
		onExists               string
		cloudNames, props, tag []string
		wait                   time.Duration
		flatcarV, kubeV        string
		diskFormat, firmware   string
		minDisk, minRAM        int
		sign                   signFlags
	)
	cmd := &cobra.Command{
		Use:   "upload IMAGE --name NAME",
		Short: "Upload an image to Glance, verified by sha512 and idempotent by name",
		Long: `Upload a qcow2 or raw image (detected from its header) into OpenStack Glance.

Credentials come from clouds.yaml like the openstack CLI (OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml, with secure.yaml beside it) for
--cloud or OS_CLOUD, else from the plain OS_* variables of an openrc file (including
OS_USER_DOMAIN_NAME, OS_PROJECT_DOMAIN_NAME and application credentials). Several --cloud flags
upload to several clouds or regions at once.

The image gets container_format=bare, the disk_format of the file, the properties os_distro=flatcar,
os_type=linux, hw_qemu_guest_agent=yes, architecture, os_version and kubernetes_version, the tags
flatcar-capo and kube-<version>; --property overrides. min_disk is the virtual size in GiB, rounded
up (Nova then refuses a too-small flavor or root volume by name), min_ram 2048 MiB (kubeadm's
minimum); hw_firmware_type=uefi for images that boot only with UEFI (arm64, qemu_uefi). Versions and architecture default to the build
record IMAGE.build.json ({"flatcarVersion", "kubernetesVersion", "arch"}) when it exists.

The file is streamed with its length known (--disk-format qcow2 turns a raw IMAGE into qcow2 on the
way, without a temporary file); its sha512 is compared with Glance's os_hash_value once
the image is active. Whatever fails, the half-made image is deleted; one that could not be (Glance
went away) is removed by the next run. With --on-exists reuse (default) an active image of the same
name and content is kept and nothing is uploaded; replace uploads anew and then deletes the older
images of that name, so exactly one matches (CAPO requires that); fail refuses an existing name.

With --sign-key KEY and --sign-cert-uuid UUID (a certificate in the cloud's Barbican) or
--sign-cert CERT.pem (stored in Barbican for you), the image carries img_signature,
img_signature_hash_method (SHA-512), img_signature_key_type (RSA-PSS, ECC_SECP384R1 or
ECC_SECP521R1) and img_signature_certificate_uuid: Glance verifies the data against them while it
arrives and refuses a mismatch, and Nova checks them again at boot (verify_glance_signatures). The
key must match the certificate and the certificate be valid, or nothing is uploaded.

Prints the image ID, one line per cloud.`,
		Example: `  flatcar-capo upload flatcar-capo.qcow2 --name flatcar-4459.2.0-kube-v1.33.1 --cloud mycloud
  flatcar-capo upload flatcar.raw --name flatcar-k8s --cloud east --cloud west --on-exists replace -o json`,
		Args: exactArgs(1, "IMAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			pmode := progress.Auto
			if len(cloudNames) > 1 {
				pmode = progress.Lines // one bar per cloud would overwrite each other
			}
			results, uerr := glance.UploadFile(cmd.Context(), glance.FileUpload{File: args[0], DiskFormat: disk.Format(diskFormat),
				Clouds: cloudNames, Name: name, Visibility: visibility, OnExists: onExists, Wait: wait,
				Metadata: glance.MetadataInput{FlatcarVersion: flatcarV, KubernetesVersion: kubeV, Properties: props, Tags: tag,
					MinDiskGiB: minDisk, MinRAMMiB: minRAM, Firmware: firmware},
				Signing:  func() (*glance.Signing, error) { _, g, err := sign.signing(true); return g, err },
				Log:      &lockedWriter{w: stderr},
				Progress: progress.To(stderr, pmode)})
			if len(results) == 0 {
				return uerr
			}
			// What each cloud got goes to stderr, its image ID to stdout.
			if err := report(cmd, results, func(w io.Writer) error {
				for _, r := range results {
					label := r.Cloud
					if r.Region != "" {
						label += "/" + r.Region
					}
					fmt.Fprintf(stderr, "%s: %s %s (%s, %s, %s %s)\n", label, r.Action, r.ID, r.DiskFormat,
						progress.Bytes(r.Size), r.HashAlgo, r.Checksum)
					fmt.Fprintln(w, r.ID)
				}
				return nil
			}); err != nil {
				return err
			}
			return uerr
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "image name in Glance (required)")
	f.StringArrayVar(&cloudNames, "cloud", nil, "cloud name in clouds.yaml; repeat to upload to several clouds/regions (default $OS_CLOUD, then OS_* variables)")
	f.StringArrayVar(&props, "property", nil, "extra or overriding image property KEY=VALUE (repeatable)")
	f.StringArrayVar(&tag, "tag", nil, "extra image tag (repeatable)")
	f.StringVar(&visibility, "visibility", "", "private, shared, community or public (default: Glance's)")
	f.StringVar(&onExists, "on-exists", string(glance.Reuse), "when the name exists: reuse, replace or fail")
	f.DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for the image to become active")
	f.StringVar(&diskFormat, "disk-format", "", "qcow2 streams a raw IMAGE as qcow2, raw streams a qcow2 IMAGE's disk as raw (Ceph-backed Glance), on the fly (default: the file's own format)")
	f.IntVar(&minDisk, "min-disk", 0, "min_disk in GiB (default: the virtual size, rounded up; smaller is refused)")
	f.IntVar(&minRAM, "min-ram", glance.DefaultMinRAMMiB, "min_ram in MiB")
	f.StringVar(&firmware, "firmware", "", "uefi sets hw_firmware_type=uefi, bios leaves it out (default: uefi for arm64 and qemu_uefi images)")
	f.StringVar(&flatcarV, "flatcar-version", "", "os_version property (default: from IMAGE.build.json)")
	f.StringVar(&kubeV, "kubernetes-version", "", "kubernetes_version property and kube-<v> tag (default: from IMAGE.build.json)")
	sign.register(f)
	addOutputFlag(f)
	return cmd
}

// lockedWriter serialises the notes of concurrent uploads line by line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
