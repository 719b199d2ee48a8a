package configdrive

import (
	"fmt"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Read returns openstack/latest/user_data of a config drive and checks its label: the tests'
// reading of what Write made, as a guest reads it.
func Read(path string) ([]byte, error) {
	b, err := file.OpenFromPath(path, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	fi, err := b.Stat()
	if err != nil {
		return nil, err
	}
	fsys, err := iso9660.Read(b, fi.Size(), 0, 2048)
	if err != nil {
		return nil, fmt.Errorf("%s is not an ISO 9660 config drive: %w", path, err)
	}
	if l := strings.TrimRight(fsys.Label(), "\x00 "); l != Label {
		return nil, fmt.Errorf("%s is labelled %q, not %q", path, l, Label)
	}
	return fsys.ReadFile("openstack/latest/user_data")
}
