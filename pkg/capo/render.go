package capo

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// CAPI API versions a template can be rendered for.
const (
	CAPIv1beta1 = "v1beta1" // every CAPI release with Ignition support; CAPI stops serving it in 1.16
	CAPIv1beta2 = "v1beta2" // CAPI 1.11 and newer (default: CAPO v0.14 needs CAPI 1.12+)
)

// Variable names of the cluster template (clusterctl's and CAPO's names).
const (
	VarClusterName       = "CLUSTER_NAME"
	VarKubernetesVersion = "KUBERNETES_VERSION"
	VarImageName         = "OPENSTACK_FLATCAR_IMAGE_NAME"
)

// renderOptions selects the template and the variables to fill.
type renderOptions struct {
	// CAPIAPI is CAPIv1beta2 (default) or CAPIv1beta1.
	CAPIAPI string
	// Flavor is FlavorBaked (default), FlavorSysextBaked or FlavorSysext.
	Flavor string
	// Values fills ${VAR} placeholders; variables left out stay for clusterctl to fill.
	Values map[string]string
	// ImageRef is how machine templates name the image: ImageRefFilter (default), ImageRefID
	// or ImageRefORC; ImageSource (with orc) makes the ORC Image download it.
	ImageRef    string
	ImageSource *ImageSource
	// InsecureNoHash drops the sysext flavor's verification.hash; SysupdateURL adds the
	// systemd-sysupdate config of a self-hosted bakery (sysext publish) for patch updates.
	InsecureNoHash bool
	SysupdateURL   string
	// Trust is the nodes' CA and proxy for their downloads (manifests --ca-file, --*-proxy).
	Trust NodeTrust
	// SysupdateKeyring (sysext.PublicKeyring) makes the transfer Verify=true and installs the
	// keyring as systemd-sysupdate's.
	SysupdateKeyring []byte
	// SysextArch is the sysext flavor's architecture in systemd's spelling (x86-64, arm64;
	// DefaultSysextArch when empty): it names the file downloaded at boot (SysextFlags.arch).
	SysextArch string
	// WithoutAPILoadBalancer renders CAPO's without-lb variant: no Octavia load balancer, the
	// API server's floating IP on the one control plane machine.
	WithoutAPILoadBalancer bool
	// ClusterClass renders a Flatcar ClusterClass with its templates and a Cluster using it
	// through topology (image, machine flavors and the rest as the Cluster's variables).
	ClusterClass bool
	// Flags names the flag that gave each value, for messages (default: --set VAR).
	Flags map[string]string
}

// flag is the flag that gave the value of variable name.
func (o renderOptions) flag(name string) string {
	if f := o.Flags[name]; f != "" {
		return f
	}
	return "--set " + name
}

// Rendered is a rendered and validated cluster template.
type Rendered struct {
	Manifest []byte `json:"-"`
	// Flavor is the template's flavor (FlavorBaked when none was asked for).
	Flavor string `json:"flavor"`
	// Variables are all the variables the template uses; Missing those still unset. When
	// Missing is empty the manifest is final (node-side ${COREOS_*} unescaped).
	Variables []string `json:"variables"`
	Missing   []string `json:"missing"`
	// Documents are "apiVersion Kind name" of each decoded document.
	Documents []string `json:"documents"`
	// UserData is the estimated user-data size of each bootstrap config, by document.
	UserData []UserDataEstimate `json:"userData"`
	// ClusterctlInit installs the providers with the feature gates the output needs.
	ClusterctlInit string `json:"clusterctlInit"`
}

// UserDataEstimate is the base64 size of a bootstrap config's user-data as Nova receives it.
type UserDataEstimate struct {
	Document string `json:"document"`
	Bytes    int    `json:"bytes"`
	Limit    int    `json:"limit"`
}

// renderChecked fills the template and validates the result: every document decodes strictly into
// its upstream Go type, every additionalConfig translates to valid Ignition 2.3, and every
// estimated user-data stays under Nova's limit. Unset variables are validated with sample
// values of the right shape. Every error is about the caller's values or choice of template, so
// it wraps errs.ErrInvalid.
func renderChecked(opts renderOptions) (*Rendered, error) {
	r, err := render(opts)
	return r, errs.Invalid(err)
}

func render(opts renderOptions) (*Rendered, error) {
	if err := images.ValidateProxies(opts.Trust.HTTPProxy, opts.Trust.HTTPSProxy, opts.Trust.NoProxy); err != nil {
		return nil, err
	}
	tmpl, err := flavorTemplate(opts.Flavor, opts.CAPIAPI, opts.ClusterClass,
		chainCLC(sysextCLC(opts.Flavor, opts.InsecureNoHash, opts.SysupdateURL, opts.SysupdateKeyring, opts.Values[VarKubernetesVersion], opts.SysextArch), trustCLC(opts.Trust)))
	if err != nil {
		return nil, err
	}
	if opts.WithoutAPILoadBalancer {
		if _, ok := opts.Values[varControlPlaneCount]; ok {
			return nil, fmt.Errorf("%s: without an API server load balancer the control plane is one machine (its floating IP is the API server's address), as in CAPO's without-lb template; drop --set %s or keep the load balancer", varControlPlaneCount, varControlPlaneCount)
		}
		if tmpl, err = withoutAPILoadBalancer(tmpl); err != nil {
			return nil, err
		}
	}
	if opts.ClusterClass && opts.ImageRef != "" && opts.ImageRef != ImageRefFilter || opts.ClusterClass && opts.ImageSource != nil {
		return nil, fmt.Errorf("--clusterclass names the image by its Glance name (the Cluster's imageName variable): --image-ref %s and --image-source are not for it", opts.ImageRef)
	}
	_, byID := opts.Values[VarImageID]
	if opts.ImageRef == ImageRefID && opts.Values[VarImageName] != "" {
		// The ID selects the image; a name (from a build record) has nowhere to go.
		opts.Values = maps.Clone(opts.Values)
		delete(opts.Values, VarImageName)
	}
	if tmpl, err = withImageRef(tmpl, opts.ImageRef, opts.ImageSource, byID); err != nil {
		return nil, err
	}
	vars, err := variables(tmpl)
	if err != nil {
		return nil, fmt.Errorf("embedded template: %w", err)
	}
	for name := range opts.Values {
		if _, ok := slices.BinarySearch(vars, name); !ok {
			return nil, fmt.Errorf("%s: the template has no variable %s; it uses %s", opts.flag(name), name, strings.Join(vars, ", "))
		}
	}
	if err := checkValues(opts.Values, opts.flag); err != nil {
		return nil, err
	}
	if v := opts.Values[VarImageName]; opts.ImageRef == ImageRefORC && v != "" && !strings.Contains(v, "${") && len(validation.IsDNS1123Subdomain(v)) > 0 {
		return nil, fmt.Errorf("%s %q: with --image-ref orc the image name is also the name of the ORC Image object, a Kubernetes name: lower-case letters, digits, '-' and '.' (an RFC 1123 DNS subdomain); rename the image, or use --image-ref filter or id", opts.flag(VarImageName), v)
	}
	out, missing, err := substituteYAML(tmpl, opts.Values)
	if err != nil {
		return nil, err
	}
	if len(missing) == 0 {
		// A final manifest, for kubectl: the template's how-to-render comment no longer applies.
		for bytes.HasPrefix(out, []byte("#")) {
			_, out, _ = bytes.Cut(out, []byte("\n"))
		}
		out = append([]byte("# Rendered by flatcar-capo manifests: Flatcar nodes on CAPO.\n"), out...)
	}
	r := &Rendered{Manifest: out, Flavor: cmp.Or(opts.Flavor, FlavorBaked), Variables: vars, Missing: missing,
		ClusterctlInit: clusterctlInit(opts.ClusterClass)}
	// Validate a fully filled copy: sample values stand in for what clusterctl fills later.
	full := map[string]string{}
	for _, name := range missing { // the others have a value or a default
		full[name] = sampleValue(name)
	}
	maps.Copy(full, opts.Values)
	filled, _, err := substituteYAML(tmpl, full)
	if err != nil {
		return nil, err
	}
	if err := checkRoundTrip(tmpl, filled, full, opts.flag); err != nil {
		return nil, err
	}
	if err := r.validate(filled, opts); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Rendered) validate(manifest []byte, opts renderOptions) error {
	docs, err := ParseDocuments("rendered template", manifest)
	if err != nil {
		var given []string
		for name := range opts.Values {
			given = append(given, opts.flag(name))
		}
		slices.Sort(given)
		return fmt.Errorf("the rendered template is not valid YAML (check the values given: %s): %w", strings.Join(slices.Compact(given), ", "), err)
	}
	var problems []string
	for _, d := range docs {
		if _, err := decodeStrict(d); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		r.Documents = append(r.Documents, d.APIVersion+" "+d.Kind+" "+d.Name)
		b, ok := newBootstrapSpec(d)
		if !ok {
			continue
		}
		var additional *igntypes.Config
		if src, ok := b.additionalConfig(); ok {
			res := TranspileCLC(src)
			if res.Fatal || len(res.Issues) > 0 {
				problems = append(problems, fmt.Sprintf("%s: additionalConfig: %v", d, res.Issues))
				continue
			}
			additional = &res.Ignition
		}
		size, merged, err := estimateUserData(b, additional)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d, err))
			continue
		}
		if err := validateIgnition(merged); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d, err))
		}
		r.UserData = append(r.UserData, UserDataEstimate{Document: d.Kind + " " + d.Name, Bytes: size, Limit: userDataLimit})
		if size > userDataLimit {
			problems = append(problems, fmt.Sprintf("%s: estimated user-data is %d bytes, over Nova's limit of %d", d, size, userDataLimit))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the rendered template is invalid:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// sampleValue is a stand-in of the right shape for validating an unset variable.
func sampleValue(name string) string {
	switch {
	case strings.HasSuffix(name, "_MACHINE_COUNT"):
		return "1"
	case name == VarKubernetesVersion:
		return "v1.33.0"
	case strings.HasSuffix(name, "_SHA512"):
		return strings.Repeat("0", 128)
	case strings.HasSuffix(name, "_B64"):
		return "c2FtcGxl"
	case name == VarClusterName:
		return "sample"
	case strings.HasSuffix(name, "_URL"):
		return "https://mirror.example/extensions"
	case strings.HasSuffix(name, "_NAMESERVERS"):
		return "192.0.2.53"
	case strings.HasSuffix(name, "_ID"):
		return "00000000-0000-0000-0000-000000000000"
	}
	return "sample"
}
