package inspect

import (
	"strings"
	"testing"
)

// Which containerd the node runs, from the /etc/extensions links inspect read: ours only with
// Flatcar's masked; a mask alone leaves none (an error), ours beside Flatcar's is ambiguous.
func TestContainerdOf(t *testing.T) {
	mask := ExtensionLink{Name: "containerd-flatcar", Kind: "masked", Target: "/dev/null"}
	ours := ExtensionLink{Name: "containerd", Kind: "symlink", WouldMerge: true, Resolved: "/opt/extensions/containerd/containerd-2.3.7-x86-64.raw",
		ExtensionRelease: map[string]string{"SYSEXT_VERSION_ID": "2.3.7"}}
	broken := ours
	broken.WouldMerge = false
	for _, c := range []struct {
		links []ExtensionLink
		want  string
		code  string
	}{
		{nil, "built-in", ""},
		{[]ExtensionLink{mask, ours}, "2.3.7 (/opt/extensions/containerd/containerd-2.3.7-x86-64.raw)", ""},
		{[]ExtensionLink{mask}, "none", "containerd-missing"},
		{[]ExtensionLink{mask, broken}, "none", "containerd-missing"},
		{[]ExtensionLink{ours}, "built-in (containerd-flatcar is not masked", "containerd-ambiguous"},
	} {
		r := &Report{Extensions: Extensions{Links: c.links}}
		r.Extensions.Containerd = containerdOf(c.links)
		if !strings.HasPrefix(r.Extensions.Containerd, c.want) {
			t.Errorf("%+v: %q, want %q", c.links, r.Extensions.Containerd, c.want)
		}
		ruleContainerd(r)
		code := ""
		if len(r.Findings) > 0 {
			code = r.Findings[0].Code
		}
		if code != c.code {
			t.Errorf("%+v: finding %q, want %q", c.links, code, c.code)
		}
	}
}
