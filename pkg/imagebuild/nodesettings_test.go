package imagebuild

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// The packer method gets the node settings' files in its payload's images/root, the tree
// packer/scripts/install-images.sh copies to / in the build VM (as it does the containerd
// settings): USB storage off unless kept, enabled-sysext.conf when asked, with or without images.
func TestPackerPayloadCarriesNodeSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		node NodeSettings
		want map[string]string
	}{
		{"default", NodeSettings{}, map[string]string{node.USBStorageConf: node.USBStorageOff}},
		{"extensions", NodeSettings{EnableSysext: []string{"zfs", "podman"}},
			map[string]string{node.USBStorageConf: node.USBStorageOff, node.EnabledSysextConf: "zfs\npodman\n"}},
		{"kept", NodeSettings{KeepUSBStorage: true}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := new(multistep.BasicStateBag)
			keyOptions.put(state, &Options{Node: tc.node})
			payload := t.TempDir()
			if err := writeImagesPayload(context.Background(), state, payload); err != nil {
				t.Fatal(err)
			}
			tree := filepath.Join(payload, "images", "root")
			for _, p := range []string{node.USBStorageConf, node.EnabledSysextConf} {
				b, err := os.ReadFile(filepath.Join(tree, node.InRoot(p)))
				want, ok := tc.want[p]
				switch {
				case ok && (err != nil || string(b) != want):
					t.Errorf("%s in the payload = %q, %v; want %q", p, b, err, want)
				case !ok && err == nil:
					t.Errorf("%s in the payload: %q, want none", p, b)
				}
			}
		})
	}
}
