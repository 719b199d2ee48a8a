package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

type manifestsReport struct {
	*capo.Rendered
	Manifest   string `json:"manifest,omitempty"`
	OutputFile string `json:"outputFile,omitempty"`
}

func newManifestsCommand() *cobra.Command {
	var (
		o                                  capo.ManifestsOptions
		imageName, k8sVersion, clusterName string
		record                             string
		apiLoadBalancer                    bool
	)
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "Render a CAPO cluster template for Flatcar nodes (clusterctl-compatible)",
		Long: `Prints a cluster template for Flatcar Container Linux nodes on Cluster API Provider OpenStack:
Secret, Cluster, OpenStackCluster, KubeadmControlPlane, OpenStackMachineTemplates for control plane
and workers, MachineDeployment and KubeadmConfigTemplate, with format: ignition, node name and
providerID from coreos-metadata, and kubeadm.service ordered after containerd.

The documents are CAPI v1beta2 (CAPI 1.11+; CAPO v0.14 needs CAPI 1.12+), or v1beta1 with
--capi-api v1beta1 for older CAPI releases; CAPO's are infrastructure v1beta1 (CAPO v0.14's API).

The API server sits behind an Octavia load balancer. Clouds without Octavia use
--api-server-load-balancer=false, CAPO's without-lb template: CAPO attaches the API server's
floating IP to the one control plane machine. (CAPO documents that a cluster with neither a load
balancer nor a floating IP needs network configuration beyond a template.)

--clusterclass renders a ClusterClass (CAPI v1beta2) instead: the class
(${CLUSTER_CLASS_NAME:=flatcar}) with its OpenStackClusterTemplate, KubeadmControlPlaneTemplate, OpenStackMachineTemplates and
KubeadmConfigTemplate, carrying the flavor's Ignition settings, plus the cluster's Secret and a
Cluster with topology: version is topology.version, and the variables imageName,
controlPlaneFlavor, workerFlavor, externalNetworkID, cloudName, dnsNameservers and sshKeyName are
patched into the templates, so a new image or Kubernetes version is a change of the Cluster.
CAPI refuses every ClusterClass and topology Cluster unless the management cluster runs with the
ClusterTopology feature gate: ` + capo.GateTopology + ` beside ` + capo.GateIgnition + ` at clusterctl init.

Placeholders use clusterctl's ${VAR} syntax and CAPO's variable names; fill some with --set (or
--image-name, --kubernetes-version, --cluster-name) and leave the rest to
'clusterctl generate cluster NAME --from FILE'. When every variable is set the output is a plain
manifest for kubectl apply. ${COREOS_OPENSTACK_*} values are filled on the node, not here.

Before printing, every document is decoded strictly into the upstream CAPI/CAPO Go types, the
additionalConfig is translated to Ignition 2.3 and validated, and the user-data size is estimated
against Nova's 64 KiB limit (reported on stderr, or in -o json).

--flavor picks the template that fits the image (each is the base template of the CAPI API version
in templates/ with the flavor's additionalConfig from templates/clc/):
  baked         an image built by 'build' (Packer): Kubernetes installed in it (default)
  sysext-baked  an image built by 'build --method sysext': the Kubernetes sysext is in the image,
                nothing is downloaded at boot; update-engine and locksmithd are masked
  sysext        Flatcar's stock OpenStack image: Ignition downloads kubernetes-<version>-<arch>.raw
                at first boot from KUBERNETES_SYSEXT_URL (--sysext-url, default
                ` + capo.DefaultSysextURL + `) and links it as
                /etc/extensions/kubernetes.raw (CAPO's flatcar-sysext flavor)`,
		Example: `  # A template for clusterctl, with the image this tool uploaded
  flatcar-capo manifests --image-name flatcar-stable-4459.2.0 --output-file flatcar.yaml
  clusterctl generate cluster demo --from flatcar.yaml > demo.yaml

  # Everything filled: a manifest for kubectl (CAPI v1beta2; --capi-api v1beta1 for CAPI before 1.11)
  flatcar-capo manifests --cluster-name demo --set WORKER_MACHINE_COUNT=2 ...

  # A cloud without Octavia: no API load balancer, the API server's floating IP on one control plane machine
  flatcar-capo manifests --image-name flatcar-stable-4459.2.0 --api-server-load-balancer=false

  # A ClusterClass and a Cluster using it (topology): image and version are the Cluster's
  flatcar-capo manifests --clusterclass --flavor sysext-baked --image-name flatcar-stable-4459.2.0 --output-file flatcar-class.yaml

  # Stock Flatcar image, Kubernetes sysext from a mirror inside the cloud (sysext create makes it)
  flatcar-capo manifests --flavor sysext --sysext-url http://10.0.0.5/extensions --kubernetes-version v1.33.4`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			o.ImageName, o.ClusterName = given(f, "image-name", imageName), given(f, "cluster-name", clusterName)
			o.KubernetesVersion = given(f, "kubernetes-version", k8sVersion)
			o.Record, o.FlavorGiven, o.Image.RefGiven = record, f.Changed("flavor"), f.Changed("image-ref")
			o.WithoutAPILoadBalancer, o.Network.Log = !apiLoadBalancer, cmd.ErrOrStderr()
			o.Log = cmd.ErrOrStderr()
			r, err := capo.Manifests(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printManifests(cmd, manifestsReport{Rendered: r, OutputFile: o.OutputFile})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ImageRepository, "image-repository", "", "kubeadm's imageRepository (what build --image-repository preloaded the images under)")
	f.StringArrayVar(&o.Sets, "set", nil, "fill a template variable, VAR=value (repeatable), e.g. --set WORKER_MACHINE_COUNT=3")
	f.StringVar(&imageName, "image-name", "", "Glance image name (sets "+capo.VarImageName+")")
	f.StringVar(&k8sVersion, "kubernetes-version", "", "sets "+capo.VarKubernetesVersion+": an exact "+kubernetes.ExampleVersion+", or stable or a minor such as 1.36 resolved through --kubernetes-mirror")
	f.StringVar(&o.KubernetesMirror, "kubernetes-mirror", kubernetes.DefaultMirror, "where stable.txt and stable-1.NN.txt are read for --kubernetes-version stable or a minor")
	addNetworkFlags(f, &o.Network) // for the marker files of stable or a minor
	f.StringVar(&clusterName, "cluster-name", "", "cluster name (sets "+capo.VarClusterName+")")
	f.StringVar(&o.CAPIAPI, "capi-api", capo.CAPIv1beta2, "CAPI API version of the documents: v1beta2 (CAPI 1.11+; CAPO v0.14 needs CAPI 1.12+), or v1beta1 for older CAPI (CAPI stops serving it in 1.16)")
	f.StringVar(&o.Flavor, "flavor", capo.FlavorBaked, "template flavor: "+strings.Join(capo.FlavorNames(), ", ")+" (see above)")
	f.StringVar(&o.SysextURL, "sysext-url", "", "--flavor sysext: directory URL serving kubernetes-<version>-<arch>.raw (sets "+capo.VarSysextURL+")")
	f.BoolVar(&apiLoadBalancer, "api-server-load-balancer", true, "an Octavia load balancer in front of the API server; =false for clouds without Octavia renders CAPO's without-lb variant: the API server's floating IP on one control plane machine (CONTROL_PLANE_MACHINE_COUNT is 1)")
	f.BoolVar(&o.ClusterClass, "clusterclass", false, "a Flatcar ClusterClass with its templates, and a Cluster using it through topology: image, Kubernetes version (topology.version) and machine flavors are the Cluster's; CAPI v1beta2, --flavor baked or sysext-baked; needs "+capo.GateTopology+" at clusterctl init")
	f.StringVar(&o.Image.Ref, "image-ref", capo.ImageRefFilter, "how machine templates name the image: filter (image.filter.name), id (image.id, the Glance ID), orc (imageRef to an ORC Image, CAPO >= v0.11)")
	f.StringVar(&o.Image.ID, "image-id", "", "the Glance image ID for --image-ref id or orc (sets "+capo.VarImageID+"; default: from --from-record)")
	f.StringVar(&o.Image.Source, "image-source", "", "URL of the image's qcow2 on your HTTP server: a managed ORC Image downloads it (sha512-checked, onDelete: detach); implies --image-ref orc")
	f.StringVar(&o.Image.SHA512, "image-sha512", "", "sha512 of the --image-source file (default: from --from-record)")
	f.StringVar(&record, "from-record", "", "a build record (IMAGE.qcow2.build.json): image name, Kubernetes version, flavor, Glance ID and sha512 from it")
	f.StringVar(&o.Sysext.File, "sysext", "", "--flavor sysext: the sysext FILE the server serves; its sha512 goes into Ignition's verification.hash and its architecture (extension-release ARCHITECTURE, file name) into the file name nodes download (default: <sysext-url>/<file>.sha512, checked against the file, or --from-record)")
	f.BoolVar(&o.Sysext.InsecureNoHash, "insecure-no-hash", false, "DANGEROUS: --flavor sysext without verification.hash (nodes boot whatever the server sends)")
	f.StringVar(&o.Sysext.SysupdateURL, "sysupdate-url", "", "--flavor sysext|sysext-baked: the self-hosted bakery (sysext publish) nodes take Kubernetes patch updates from with systemd-sysupdate")
	f.StringVar(&o.Sysext.SysupdateKey, "sysupdate-key", "", "with --sysupdate-url: the public OpenPGP key FILE of a bakery published with --sign-key; installed as "+sysext.ImportPubring+" and the transfer says Verify=true")
	f.StringVar(&o.Sysext.Arch, "arch", "", "--flavor sysext: the nodes' architecture, amd64 (x86-64) or arm64, naming kubernetes-<version>-<arch>.raw (default: from --sysext FILE or --from-record, else amd64); a different one there is refused (the other flavors' image carries its own)")
	// --ca-file, the network flag, is the nodes' CA too.
	f.Lookup("ca-file").Usage = "PEM CA(s) trusted here (the marker files) and by the nodes: Ignition's certificateAuthorities (its own downloads, e.g. the sysext) and /etc/ssl/certs"
	f.StringVar(&o.HTTPProxy, "http-proxy", "", "HTTP_PROXY of the nodes' containerd, kubelet and systemd-sysupdate (Ignition 2.3 itself has no proxy)")
	f.StringVar(&o.HTTPSProxy, "https-proxy", "", "HTTPS_PROXY of the nodes' containerd, kubelet and systemd-sysupdate")
	f.StringVar(&o.NoProxy, "no-proxy", "", "NO_PROXY additions (localhost,127.0.0.1,169.254.169.254 are always in it): the API server and its LB, node subnet, service and pod CIDRs, .svc,.cluster.local")
	f.StringVar(&o.OutputFile, "output-file", "", "write the manifest to this file (mode 0600) instead of stdout")
	addOutputFlag(f)
	return cmd
}

// given is a flag's value when it was given (or has one), else nil.
func given(f *pflag.FlagSet, name, value string) *string {
	if f.Changed(name) || value != "" {
		return &value
	}
	return nil
}

// printManifests writes the manifest to stdout (text, no --output-file) or into the report.
func printManifests(cmd *cobra.Command, rep manifestsReport) error {
	if wantsJSON(cmd) {
		if rep.OutputFile == "" {
			rep.Manifest = string(rep.Rendered.Manifest)
		}
		return report(cmd, rep, nil)
	}
	w := cmd.ErrOrStderr()
	if rep.OutputFile != "" {
		fmt.Fprintf(w, "Wrote %s\n", rep.OutputFile)
	} else if _, err := cmd.OutOrStdout().Write(rep.Rendered.Manifest); err != nil {
		return err
	}
	fmt.Fprintf(w, "Flavor %s.\n", rep.Flavor)
	fmt.Fprintf(w, "Validated %d documents against the CAPI/CAPO API types; additionalConfig translates to valid Ignition 2.3.\n", len(rep.Documents))
	for _, u := range rep.UserData {
		fmt.Fprintf(w, "User-data estimate: %s %d of %d bytes\n", u.Document, u.Bytes, u.Limit)
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintf(w, "Still to set (clusterctl generate cluster, or --set): %s\n", strings.Join(rep.Missing, ", "))
	} else {
		fmt.Fprintln(w, "Every variable is set: the output is a manifest for kubectl apply.")
	}
	fmt.Fprintf(w, "The management cluster needs these feature gates (CAPI refuses the output without them): %s\n", rep.ClusterctlInit)
	return nil
}
