package configdrive

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Read returns openstack/latest/user_data of a config drive and checks its label: the tests'
// reading of what Write made, as a guest reads it.
func Read(path string) ([]byte, error) {
	iso, err := os.ReadFile(path) // a config drive is a few MiB
	if err != nil {
		return nil, err
	}
	size := int64(len(iso))
	fsys, err := iso9660.Read(disk.Backend(vdisk.ReadOnly(bytes.NewReader(iso), size), false), size, 0, 2048)
	if err != nil {
		return nil, fmt.Errorf("%s is not an ISO 9660 config drive: %w", path, err)
	}
	if l := strings.TrimRight(fsys.Label(), "\x00 "); l != label {
		return nil, fmt.Errorf("%s is labelled %q, not %q", path, l, label)
	}
	return fsys.ReadFile("openstack/latest/user_data")
}
