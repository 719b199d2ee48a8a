package disk

import (
	"errors"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// RelocateBackupGPT moves the backup GPT (header and partition array) of a raw image to the
// image's last sectors after the file was enlarged, and points the primary header and a
// protective MBR at the new end, as `sgdisk -e` does. Partitions are neither moved nor resized
// (Flatcar grows ROOT at first boot). It is a no-op on a table that already ends at the end of
// the image, refuses qcow2 images, and refuses an image whose primary GPT is damaged or whose
// partitions would overlap the new backup.
func RelocateBackupGPT(path string) error {
	img, err := Open(path, true)
	if err != nil {
		return err
	}
	if err := relocateBackupGPT(img.Disk); err != nil {
		img.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return img.Close() // syncs
}

func relocateBackupGPT(s vdisk.Disk) error {
	primary, err := readHeader(s, 1)
	if err != nil {
		return fmt.Errorf("cannot move the backup GPT: the primary GPT is not valid (%w); repair it first, e.g. with 'sgdisk -e'", err)
	}
	last := s.Size()/sectorSize - 1
	arraySectors := int64((len(primary.entries) + sectorSize - 1) / sectorSize)
	arrayLBA := last - arraySectors
	lastUsable := arrayLBA - 1
	oldBackup := int64(primary.u64(32))
	if oldBackup == last && int64(primary.u64(48)) == lastUsable {
		return nil
	}
	if int64(primary.u64(48)) > lastUsable || oldBackup > last {
		return errors.New("cannot move the backup GPT: the image is smaller than its partition table says (truncated file?); only growing is supported")
	}
	parts, err := readGPTAt(s, 1)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if (p.Start+p.Size)/sectorSize-1 > lastUsable {
			return fmt.Errorf("cannot move the backup GPT: partition %d (%s) ends past LBA %d", p.Number, p.Name, lastUsable)
		}
	}

	backup := &gptHeader{raw: append([]byte{}, primary.raw...)}
	backup.setU64(24, uint64(last))
	backup.setU64(32, 1)
	backup.setU64(48, uint64(lastUsable))
	backup.setU64(72, uint64(arrayLBA))
	backup.seal()
	primary.setU64(32, uint64(last))
	primary.setU64(48, uint64(lastUsable))
	primary.seal()

	// Backup first, primary last: a crash in between leaves a valid primary and a readable table.
	if err := writeSector(s, arrayLBA, primary.entries); err != nil {
		return err
	}
	if err := writeSector(s, last, backup.raw); err != nil {
		return err
	}
	if err := writeSector(s, 1, primary.raw); err != nil {
		return err
	}
	// The old backup header now lies in free space past every partition: clear it so no tool
	// mistakes it for a table.
	if oldBackup > 1 && oldBackup < arrayLBA {
		if old, err := readHeader(s, oldBackup); err == nil && old.u64(24) == uint64(oldBackup) {
			if err := writeSector(s, oldBackup, make([]byte, sectorSize)); err != nil {
				return err
			}
		}
	}
	if mbr, err := ReadMBR(s); err == nil && mbr.Kind == MBRProtective {
		return WriteProtectiveMBR(s)
	}
	return nil
}

// writeSector writes b at lba, padded with zeros to whole sectors.
func writeSector(s vdisk.Disk, lba int64, b []byte) error {
	buf := make([]byte, (len(b)+sectorSize-1)/sectorSize*sectorSize)
	copy(buf, b)
	if _, err := s.WriteAt(buf, lba*sectorSize); err != nil {
		return fmt.Errorf("writing the GPT at LBA %d: %w", lba, err)
	}
	return nil
}
