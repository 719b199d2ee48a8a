// Package configdrive makes an OpenStack config drive in Go: an ISO 9660 filesystem (Rock
// Ridge names) labelled config-2 holding openstack/latest/user_data and meta_data.json, which
// Flatcar's openstack OEM reads Ignition from when there is no metadata service.
package configdrive

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
)

// label is the volume label cloud-init and Ignition look for.
const label = "config-2"

// MetaData is openstack/latest/meta_data.json (the fields guests commonly read).
type MetaData struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Hostname string `json:"hostname"`
}

// Write creates path (atomically) as a config drive carrying userData.
func Write(path string, userData []byte, meta MetaData) error {
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	workspace, err := os.MkdirTemp(filepath.Dir(path), ".configdrive-")
	if err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	defer os.RemoveAll(workspace)
	out, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer out.Abort()
	// The ISO is written on Finalize; the backend needs only room for the tiny tree.
	size := int64(1<<20) + int64(len(userData)) + int64(len(metaJSON))
	size = (size + 2047) / 2048 * 2048
	if err := out.Truncate(size); err != nil {
		return err
	}
	fsys, err := iso9660.Create(file.New(out.File, false), size, 0, 2048, workspace)
	if err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	if err := fsys.Mkdir("/openstack/latest"); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	for name, data := range map[string][]byte{"user_data": userData, "meta_data.json": metaJSON} {
		f, err := fsys.OpenFile("/openstack/latest/"+name, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("config drive %s: %w", name, err)
		}
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("config drive %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if err := fsys.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: label}); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	return out.Commit(0o600)
}
