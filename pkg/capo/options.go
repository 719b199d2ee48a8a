package capo

import (
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// The rules of manifests' values, before anything is looked up or rendered. Their errors wrap
// errs.ErrInvalid and name the flag, since each value comes from one.

// parseSets turns --set VAR=value pairs into template values (a later pair wins).
func parseSets(sets []string) (map[string]string, error) {
	values := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, errs.Invalidf("--set %q is not VAR=value", s)
		}
		values[k] = v
	}
	return values, nil
}

// varExternalNetworkID is CAPO's variable of the external network (router, floating IPs).
const varExternalNetworkID = "OPENSTACK_EXTERNAL_NETWORK_ID"

// uuidVars are the variables CAPO's CRDs (format: uuid) and the ClusterClass's variable schema
// take only as a UUID: the API server refuses a network or image name there.
var uuidVars = []struct{ name, flag, fix string }{
	{varExternalNetworkID, "--set " + varExternalNetworkID, "openstack network show -f value -c id NETWORK"},
	{VarImageID, "--image-id (or --set " + VarImageID + ")", "openstack image show -f value -c id IMAGE"},
}

// uuidPattern is the API server's format: uuid (k8s.io/kube-openapi's strfmt).
var uuidPattern = regexp.MustCompile(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`)

// checkUUIDs refuses a value the management cluster would refuse for a UUID variable (a
// ${...} left for clusterctl passes).
func checkUUIDs(values map[string]string) error {
	for _, v := range uuidVars {
		val, ok := values[v.name]
		if !ok || strings.Contains(val, "${") || uuidPattern.MatchString(val) {
			continue
		}
		return errs.Invalidf("%s %q is not a UUID: CAPO takes the ID, not the name (%s)", v.flag, val, v.fix)
	}
	return nil
}

// sysextURL checks --sysext-url for a flavor and returns it as VarSysextURL's value.
func sysextURL(flavor, url string) (string, error) {
	if flavor != FlavorSysext {
		return "", errs.Invalidf("--sysext-url is for --flavor sysext (the other flavors download nothing at boot)")
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return "", errs.Invalidf("--sysext-url %q: want the http(s) URL of the directory serving kubernetes-<version>-<arch>.raw", url)
	}
	if err := sysext.OneLineURL("--sysext-url", url); err != nil {
		return "", err // it goes into the CLC: a newline there would be YAML of its own
	}
	return strings.TrimRight(url, "/"), nil
}

// sysextHashOptions are how the sysext flavor's verification.hash is had: from a local copy of
// the served file (File), not at all (InsecureNoHash), plus the bakery for patch updates.
type sysextHashOptions struct {
	Flavor         string
	File           string
	InsecureNoHash bool
	SysupdateURL   string
	SysupdateKey   bool // --sysupdate-key given
}

// Validate checks the combination before any download.
func (o sysextHashOptions) Validate() error {
	if o.SysupdateURL != "" {
		if err := sysext.ValidBakeryURL("--sysupdate-url", o.SysupdateURL); err != nil {
			return err
		}
	}
	if o.SysupdateKey && o.SysupdateURL == "" {
		return errs.Invalidf("--sysupdate-key is the public key of a signed bakery: give its --sysupdate-url too")
	}
	if o.Flavor != FlavorSysext && (o.File != "" || o.InsecureNoHash) {
		return errs.Invalidf("--sysext and --insecure-no-hash are for --flavor sysext (the flavor that downloads the sysext at boot)")
	}
	if o.InsecureNoHash && o.File != "" {
		return errs.Invalidf("--insecure-no-hash and --sysext contradict each other: --sysext gives the hash")
	}
	return nil
}

// defaultSysextArch is the sysext flavor's architecture when nothing names one.
const defaultSysextArch = "x86-64"
