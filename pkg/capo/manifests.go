package capo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// ManifestsOptions are `manifests`' flags: the values, the image, the at-boot sysext, the
// nodes' trust, the template's shape and where the manifest goes.
type ManifestsOptions struct {
	// Sets are --set VAR=value; ImageName, ClusterName and KubernetesVersion are the flags
	// that set one variable each (nil: not given; given empty is refused).
	Sets                                      []string
	ImageName, ClusterName, KubernetesVersion *string
	// Record is --from-record, a build record ("": none); its values fill what the flags leave
	// unset, and the artifact beside it gives min_disk.
	Record string
	// Flavor is --flavor; FlavorGiven says it was given (else the record's flavor wins).
	Flavor      string
	FlavorGiven bool
	Image       ImageFlags
	// SysextURL is --sysext-url; KubernetesMirror serves stable.txt for a version to resolve.
	SysextURL        string
	KubernetesMirror string
	Sysext           SysextFlags
	// Network is the marker files' client; its CAFile is also the nodes' CA.
	Network                        httpx.Options
	HTTPProxy, HTTPSProxy, NoProxy string
	CAPIAPI                        string
	WithoutAPILoadBalancer         bool
	ClusterClass                   bool
	// ImageRepository is kubeadm's imageRepository (WithImageRepository).
	ImageRepository string
	// OutputFile, when set, is checked before any lookup and gets the manifest (0600).
	OutputFile string
	// Log (nil: none) gets each warning about the nodes' trust and the API version, once the
	// template is rendered.
	Log io.Writer
}

// Manifests fills the values (flags, then the record), resolves the Kubernetes version, finds
// the at-boot sysext's hash and architecture, renders and validates the template, sets the
// image repository and writes OutputFile. Bad values are errs.ErrInvalid, before any download.
func Manifests(ctx context.Context, o ManifestsOptions) (*Rendered, error) {
	values, err := parseSets(o.Sets)
	if err != nil {
		return nil, err
	}
	var rec *record.Record
	if o.Record != "" {
		if rec, err = record.ReadFlag(o.Record); err != nil {
			return nil, err
		}
	}
	flags := map[string]string{} // the flag that gave each value, for messages
	if err := setNamed(values, o, flags); err != nil {
		return nil, err
	}
	flavor := o.Flavor
	if rec != nil && !o.FlavorGiven && rec.Flavor != "" {
		flavor = rec.Flavor
	}
	imageRef, imageSource, err := o.Image.apply(values, rec, o.Record)
	if err != nil {
		return nil, err
	}
	if err := checkUUIDs(values); err != nil {
		return nil, err
	}
	if o.SysextURL != "" {
		if values[VarSysextURL], err = sysextURL(flavor, o.SysextURL); err != nil {
			return nil, err
		}
		flags[VarSysextURL] = "--sysext-url"
	}
	if _, ok := flags[VarImageID]; !ok && o.Image.ID != "" {
		flags[VarImageID] = "--image-id"
	}
	for name := range values {
		if _, ok := flags[name]; !ok && !slices.ContainsFunc(o.Sets, func(s string) bool { return strings.HasPrefix(s, name+"=") }) {
			flags[name] = "--from-record"
		}
	}
	if err := checkValues(values, renderOptions{Flags: flags}.flag); err != nil {
		return nil, err // before any download
	}
	if v := values[VarKubernetesVersion]; v != "" && !strings.HasPrefix(v, "v") && kubernetes.IsExact("v"+v) {
		values[VarKubernetesVersion] = "v" + v // CAPI wants the v prefix
	}
	if o.OutputFile != "" {
		if err := atomicfile.CheckPath(o.OutputFile); err != nil {
			return nil, err
		}
	}
	if err := resolveKubernetes(ctx, values, o); err != nil {
		return nil, err
	}
	sysextArch, keyring, err := o.Sysext.fill(ctx, flavor, values, rec)
	if err != nil {
		return nil, err
	}
	trust, err := nodeTrust(o)
	if err != nil {
		return nil, err
	}
	r, err := renderChecked(renderOptions{CAPIAPI: o.CAPIAPI, Flavor: flavor, Values: values, ImageRef: imageRef, ImageSource: imageSource,
		InsecureNoHash: o.Sysext.InsecureNoHash, SysupdateURL: strings.TrimRight(o.Sysext.SysupdateURL, "/"), SysupdateKeyring: keyring,
		SysextArch: sysextArch, WithoutAPILoadBalancer: o.WithoutAPILoadBalancer, ClusterClass: o.ClusterClass, Trust: trust, Flags: flags})
	if err != nil {
		return nil, err
	}
	warnings := trust.Warnings(r.Flavor)
	if o.CAPIAPI == CAPIv1beta1 {
		warnings = append(warnings, v1beta1Warning)
	}
	for _, w := range warnings {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "warning: %s\n", w)
		}
	}
	if o.ImageRepository != "" {
		if r.Manifest, err = withImageRepository(r.Manifest, o.ImageRepository); err != nil {
			return nil, err
		}
	}
	if o.OutputFile != "" {
		// 0600: the manifest may carry clouds.yaml credentials (OPENSTACK_CLOUD_YAML_B64).
		if err := atomicfile.WriteFile(o.OutputFile, r.Manifest, 0o600); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// setNamed sets the variables of --image-name, --cluster-name and --kubernetes-version, and
// notes the flag of each in flags.
func setNamed(values map[string]string, o ManifestsOptions, flags map[string]string) error {
	for _, v := range []struct {
		flag, name string
		value      *string
	}{
		{"image-name", VarImageName, o.ImageName}, {"cluster-name", VarClusterName, o.ClusterName},
		{"kubernetes-version", VarKubernetesVersion, o.KubernetesVersion},
	} {
		if v.value == nil {
			continue
		}
		if *v.value == "" {
			return errs.Invalidf("--%s must not be empty", v.flag)
		}
		values[v.name], flags[v.name] = *v.value, "--"+v.flag
	}
	return nil
}

// resolveKubernetes makes a stable or minor KUBERNETES_VERSION exact; a ${...} one stays.
func resolveKubernetes(ctx context.Context, values map[string]string, o ManifestsOptions) error {
	v := values[VarKubernetesVersion]
	if v == "" || strings.Contains(v, "${") {
		return nil
	}
	net := o.Network
	if err := net.Validate(); err != nil {
		return err
	}
	exact, err := kubernetes.ResolveVersion(ctx, httpx.New(net), o.KubernetesMirror, v)
	if err != nil {
		return err
	}
	values[VarKubernetesVersion] = exact
	return nil
}

// nodeTrust takes --ca-file's certificates (into Ignition's certificateAuthorities and the nodes' trust
// store) and takes the proxies; renderChecked validates them.
func nodeTrust(o ManifestsOptions) (NodeTrust, error) {
	t := NodeTrust{HTTPProxy: o.HTTPProxy, HTTPSProxy: o.HTTPSProxy, NoProxy: o.NoProxy}
	net := o.Network
	if net.CAFile == "" {
		return t, nil
	}
	if err := net.Validate(); err != nil { // reads --ca-file: its certificates, nothing else
		return t, err
	}
	t.CAPEM = net.CAPEM()
	return t, nil
}
