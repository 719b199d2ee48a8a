package novatest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The router and DHCP namespaces are read from an agent's mount table, and nothing else is.
func TestNetnsMountsReadsTheAgentsNamespaces(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	table := `24 1 0:22 / / rw,relatime - ext4 /dev/vda1 rw
401 24 0:4 net:[4026532612] /run/netns/qrouter-29d1646d-da6c-4e9f-82d0-21cf0c72b26e rw - nsfs nsfs rw
402 24 0:4 net:[4026532700] /run/netns/qdhcp-320caf32-cc5a-4da4-9933-8f46432bb440 rw - nsfs nsfs rw
403 24 0:4 net:[4026532701] /run/netns/fcapo-25461 rw - nsfs nsfs rw
404 24 0:23 / /run/netns/qrouter-x/../../etc rw - tmpfs tmpfs rw
`
	if err := os.WriteFile(mi, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	got := netnsMounts(mi)
	want := []string{"/run/netns/qrouter-29d1646d-da6c-4e9f-82d0-21cf0c72b26e", "/run/netns/qdhcp-320caf32-cc5a-4da4-9933-8f46432bb440"}
	if !slices.Equal(got, want) {
		t.Errorf("netnsMounts = %q, want %q", got, want)
	}
}
