package images

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// hostsFiles are the certs.d files: one hosts.toml per registry that has its own mirrors, one
// in _default for "*", and, with a CA and no catch-all, one per preloaded registry so the CA is
// its (the catch-all's file carries the CA itself: a per-registry file there would bypass it).
// Mirrors are listed in the order given; the registry itself is containerd's last try unless
// MirrorOnly, which makes the last mirror the server so nothing else is contacted.
func (n Node) hostsFiles(ca []byte) ([]File, error) {
	regs := map[string]bool{}
	for _, m := range n.Mirrors {
		regs[m.Registry] = true
	}
	if ca != nil && !n.Mirrors.HasCatchAll() {
		for _, r := range n.Registries {
			regs[r] = true
		}
	}
	var out []File
	for _, r := range slices.Sorted(maps.Keys(regs)) {
		// The certs.d directory containerd reads for r: containerd 2.x tries certs.d/<host>_<port>_
		// (for host:port), certs.d/<host:port> or certs.d/<host>, then certs.d/_default, and uses
		// the FIRST that exists, whole (core/remotes/docker/config).
		dir := "_default"
		if r != "*" {
			if err := validateHostPort(r); err != nil { // it becomes a directory name
				return nil, fmt.Errorf("registry %q: %v", r, err)
			}
			dir = r
		}
		hosts := node.RegistryHosts(dir)
		if path.Dir(path.Dir(hosts)) != node.ContainerdCertsDir {
			return nil, fmt.Errorf("registry %q: not a directory name under %s", r, node.ContainerdCertsDir)
		}
		caPath := ""
		if ca != nil {
			caPath = node.RegistryHostsCA(dir)
			out = append(out, File{Path: node.InRoot(caPath), Mode: 0o644, Content: ca})
		}
		var own Mirrors
		for _, m := range n.Mirrors {
			if m.Registry == r {
				own = append(own, m)
			}
		}
		body, err := hostsTOML(r, own, caPath, n.MirrorOnly)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: node.InRoot(hosts), Mode: 0o644, Content: []byte(body)})
	}
	return out, nil
}

// hostsTOML is one registry's hosts.toml: a [host."URL"] table per mirror (containerd keeps
// their order), then the root server: the registry itself (for "*", left to containerd, which
// puts the pulled registry there), or with mirrorOnly the last mirror.
func hostsTOML(registry string, mirrors Mirrors, caPath string, mirrorOnly bool) (string, error) {
	var b strings.Builder
	var err error
	q := func(s string) string {
		v, e := TOMLString(s)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	settings := func(indent string, m *Mirror) {
		if m != nil {
			fmt.Fprintf(&b, "%scapabilities = [\"pull\", \"resolve\"]\n", indent)
			if m.OverridePath() {
				fmt.Fprintf(&b, "%soverride_path = true\n", indent)
			}
		}
		if caPath != "" && (m == nil || !m.Insecure) {
			fmt.Fprintf(&b, "%sca = %s\n", indent, q(caPath))
		}
	}
	what := "registry " + registry
	if registry == "*" {
		what = "every registry without its own directory here"
	}
	fmt.Fprintf(&b, "# flatcar-capo: %s; containerd tries the hosts in this order", what)
	hosts := mirrors
	var root *Mirror
	if mirrorOnly && len(mirrors) > 0 {
		root = &mirrors[len(mirrors)-1]
		hosts = mirrors[:len(mirrors)-1]
		b.WriteString(", the last one (server) included, and nothing else (--registry-mirror-only)\n")
	} else if registry == "*" {
		b.WriteString(", then the pulled registry itself\n")
	} else {
		b.WriteString(", then the registry itself (server)\n")
	}
	switch {
	case root != nil:
		fmt.Fprintf(&b, "server = %s\n", q(root.URL))
		settings("", root)
	case registry == "docker.io": // its own endpoint is not its name
		fmt.Fprintf(&b, "server = %s\n", q("https://registry-1.docker.io"))
		settings("", nil)
	case registry != "*":
		fmt.Fprintf(&b, "server = %s\n", q("https://"+registry))
		settings("", nil)
	}
	for i := range hosts {
		fmt.Fprintf(&b, "\n[host.%s]\n", q(hosts[i].URL))
		settings("  ", &hosts[i])
	}
	return b.String(), err
}
