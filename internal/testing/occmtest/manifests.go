package occmtest

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Cloud is what the manager's cloud.conf says: the [Global] section of
// docs/openstack-cloud-controller-manager/using-openstack-cloud-controller-manager.md, with the
// keys CAPO's templates/create_cloud_conf.sh writes from a clouds.yaml.
type Cloud struct {
	AuthURL  string // Keystone v3 as the nodes reach it, e.g. http://10.0.0.2:5000/v3
	Username string
	Password string
	Project  string // the project's name (tenant-name)
	Domain   string // the user's and project's domain name (domain-name), e.g. Default
	Region   string // e.g. RegionOne
	CAFile   string // optional: the CA bundle's path on the node (ca-file), for an https AuthURL
	// EndpointType is the catalog interface the manager calls Nova and Neutron at
	// (os-endpoint-type; clouds.yaml's interface): public when empty, the manager's default.
	EndpointType string
}

// cloudConf is the cloud.conf for c: [Global] as above, and [LoadBalancer] enabled=false: the
// cloud has no Octavia, and with the load balancer enabled the manager exits when its service
// controller starts (pkg/openstack's LoadBalancer() is fatal without a load-balancer endpoint).
func cloudConf(c Cloud) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("[Global]\n")
	for _, kv := range [][2]string{{"auth-url", c.AuthURL}, {"username", c.Username}, {"password", c.Password},
		{"tenant-name", c.Project}, {"domain-name", c.Domain}, {"region", c.Region}, {"ca-file", c.CAFile},
		{"os-endpoint-type", c.EndpointType}} {
		if kv[1] == "" {
			if kv[0] == "ca-file" || kv[0] == "os-endpoint-type" {
				continue
			}
			return nil, fmt.Errorf("occmtest: cloud.conf needs %s", kv[0])
		}
		if strings.ContainsAny(kv[1], "\n\r") {
			return nil, fmt.Errorf("occmtest: cloud.conf's %s has a line break", kv[0])
		}
		// gcfg (the manager's parser) reads a quoted value with \" and \\ escaped.
		fmt.Fprintf(&b, "%s=\"%s\"\n", kv[0], strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(kv[1]))
	}
	b.WriteString("\n[LoadBalancer]\nenabled=false\n")
	return b.Bytes(), nil
}

// The upstream DaemonSet selects control-plane nodes by node-role.kubernetes.io/control-plane
// "true"; kubeadm labels them with "" (its markcontrolplane phase), so on a kubeadm cluster the
// upstream DaemonSet runs nowhere. CAPO's e2e (test/e2e/data/ccm) sets "" for this reason.
const (
	upstreamSelector = `node-role.kubernetes.io/control-plane: "true"`
	kubeadmSelector  = `node-role.kubernetes.io/control-plane: ""`
)

// lastArg is the upstream DaemonSet's last container arg, after which Manifests adds its args.
const lastArg = "            - --bind-address=127.0.0.1\n"

// Manifests renders what a user applies to the workload cluster to run the manager, in the
// order the upstream docs apply it: the cloud-config Secret in kube-system (as `kubectl create
// secret -n kube-system generic cloud-config --from-file=cloud.conf` makes it), then dir's
// upstream RBAC roles, role bindings and the DaemonSet with its ServiceAccount, as shipped
// except the DaemonSet's nodeSelector set to kubeadm's control-plane label (see
// kubeadmSelector). The DaemonSet sets no imagePullPolicy: for a tagged ref Kubernetes
// defaults it to IfNotPresent, so the preloaded image is used and nothing is pulled. It runs
// on the control-plane nodes with hostNetwork (the manager reaches Keystone and Nova from the
// node's network, before any CNI) and tolerates node.cloudprovider.kubernetes.io/uninitialized.
//
// args are flags added to the manager's (e.g. longer leader elections on a slow control plane).
func Manifests(dir string, c Cloud, args ...string) ([]byte, error) {
	conf, err := cloudConf(c)
	if err != nil {
		return nil, err
	}
	out := fmt.Appendf(nil, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cloud-config\n  namespace: kube-system\ntype: Opaque\ndata:\n  cloud.conf: %s\n",
		base64.StdEncoding.EncodeToString(conf))
	for _, f := range []string{rolesFile, bindingsFile, daemonSet} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("occmtest: %w (run scripts/install-occm.sh --force)", err)
		}
		if f == daemonSet {
			if n := bytes.Count(b, []byte(upstreamSelector)); n != 1 {
				return nil, fmt.Errorf("occmtest: %s has %d `%s`, want 1 (upstream changed: check the nodeSelector against kubeadm's label)", f, n, upstreamSelector)
			}
			b = bytes.Replace(b, []byte(upstreamSelector), []byte(kubeadmSelector), 1)
			if len(args) > 0 {
				if n := bytes.Count(b, []byte(lastArg)); n != 1 {
					return nil, fmt.Errorf("occmtest: %s has %d `%s`, want 1 (upstream changed: check where the args end)", f, n, strings.TrimSpace(lastArg))
				}
				more := lastArg
				for _, a := range args {
					more += strings.Replace(lastArg, "--bind-address=127.0.0.1", a, 1)
				}
				b = bytes.Replace(b, []byte(lastArg), []byte(more), 1)
			}
		}
		out = append(out, "---\n"...)
		out = append(out, bytes.TrimRight(b, "\n")...)
		out = append(out, '\n')
	}
	return out, nil
}

// FromCloudsYAML reads cloud's entry of a clouds.yaml into a Cloud, as CAPO's
// templates/create_cloud_conf.sh does for its users (auth_url, username, password,
// project_name, user_domain_name or domain_name, region_name; cacert becomes CAFile, the path
// the node must have it at), and its interface as the manager's os-endpoint-type.
func FromCloudsYAML(clouds []byte, cloud string) (Cloud, error) {
	var f struct {
		Clouds map[string]struct {
			Auth struct {
				AuthURL        string `json:"auth_url"`
				Username       string `json:"username"`
				Password       string `json:"password"`
				ProjectName    string `json:"project_name"`
				UserDomainName string `json:"user_domain_name"`
				DomainName     string `json:"domain_name"`
			} `json:"auth"`
			RegionName string `json:"region_name"`
			CACert     string `json:"cacert"`
			Interface  string `json:"interface"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(clouds, &f); err != nil {
		return Cloud{}, fmt.Errorf("occmtest: clouds.yaml: %w", err)
	}
	c, ok := f.Clouds[cloud]
	if !ok {
		return Cloud{}, fmt.Errorf("occmtest: clouds.yaml has no cloud %q", cloud)
	}
	a := c.Auth
	return Cloud{AuthURL: a.AuthURL, Username: a.Username, Password: a.Password, Project: a.ProjectName,
		Domain: cmp.Or(a.UserDomainName, a.DomainName), Region: c.RegionName, CAFile: c.CACert, EndpointType: c.Interface}, nil
}
