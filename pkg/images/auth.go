package images

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// HostAuth is one registry host's login for the node's containerd.
type HostAuth struct {
	Host                string
	Username, Password  string
	IdentityToken, Auth string
}

// NodeAuthHosts are the hosts the node pulls from: every mirror's, else every registry's.
func NodeAuthHosts(ms Mirrors, registries []string) []string {
	hosts := registries
	if len(ms) > 0 {
		hosts = nil
		for _, m := range ms {
			hosts = append(hosts, m.Host)
		}
	}
	var out []string // each once, in order
	for _, h := range hosts {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// NodeAuth reads each host's login from the docker config the build pulls with ($DOCKER_CONFIG
// or ~/.docker, credential helpers included); hosts without one are left out, none at all is an
// error naming them.
func NodeAuth(hosts []string) ([]HostAuth, error) {
	var out []HostAuth
	for _, h := range hosts {
		reg, err := name.NewRegistry(h, name.Insecure)
		if err != nil {
			return nil, fmt.Errorf("--node-registry-auth: %q: %v", h, err)
		}
		a, err := authn.DefaultKeychain.Resolve(reg)
		if err != nil {
			return nil, fmt.Errorf("--node-registry-auth: reading the docker config for %s: %v", h, err)
		}
		cfg, err := a.Authorization()
		if err != nil || cfg == nil || (cfg.Username == "" && cfg.Password == "" && cfg.IdentityToken == "" && cfg.Auth == "" && cfg.RegistryToken == "") {
			continue
		}
		ha := HostAuth{Host: h, Username: cfg.Username, Password: cfg.Password, IdentityToken: cfg.IdentityToken}
		if ha.Username == "" {
			ha.Auth = cfg.Auth // base64 user:password, when the config had nothing decoded
		}
		out = append(out, ha)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--node-registry-auth: the docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json) has no login for %s: `docker login HOST` first, or leave the flag out", strings.Join(hosts, ", "))
	}
	return out, nil
}

// authDropIn is the containerd drop-in with the logins. containerd 2.1 (Flatcar 4xxx) gives the
// CRI's pulls the registry.configs.<host>.auth of its config also with config_path (hosts.toml
// has no credentials), falling back from the transfer service to its local pull for it; the
// option is deprecated and gone in containerd 2.2.
func authDropIn(auths []HostAuth) (File, error) {
	var b strings.Builder
	b.WriteString("# flatcar-capo --node-registry-auth: the registry logins of the CRI (root-only; a secret in the image)\n")
	b.WriteString("# containerd 2.0/2.1 read registry.configs.<host>.auth with config_path too; removed in 2.2\nversion = 2\n")
	for _, a := range auths {
		if err := validateHostPort(a.Host); err != nil {
			return File{}, fmt.Errorf("--node-registry-auth: host %q: %v", a.Host, err)
		}
		h, _ := TOMLString(a.Host)
		fmt.Fprintf(&b, "\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.%s.auth]\n", h)
		for _, kv := range []struct{ k, v string }{{"username", a.Username}, {"password", a.Password}, {"identitytoken", a.IdentityToken}, {"auth", a.Auth}} {
			if kv.v == "" {
				continue
			}
			v, err := TOMLString(kv.v)
			if err != nil {
				return File{}, fmt.Errorf("--node-registry-auth: the %s of %s has a control character", kv.k, a.Host)
			}
			fmt.Fprintf(&b, "  %s = %s\n", kv.k, v)
		}
	}
	return File{Path: node.InRoot(node.ContainerdAuthDropIn), Mode: 0o600, Content: []byte(b.String())}, nil
}
