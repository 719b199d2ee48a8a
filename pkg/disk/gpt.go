package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Partition is one GPT entry.
type Partition struct {
	Number   int    `json:"number"`
	Name     string `json:"name"`
	TypeGUID string `json:"typeGuid"`
	UUID     string `json:"uuid"`
	Start    int64  `json:"start"` // bytes from the start of the disk
	Size     int64  `json:"size"`  // bytes
}

// Well-known GPT partition type GUIDs of Flatcar's layout.
var TypeNames = map[string]string{
	"C12A7328-F81F-11D2-BA4B-00A0C93EC93B": "efi",
	"21686148-6449-6E6F-744E-656564454649": "bios",
	"0FC63DAF-8483-4772-8E79-3D69D8477DE4": "data",
	"5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6": "flatcar-usr",
	"3884DD41-8582-4404-B9A8-E9B84F2DF50E": "flatcar-resize",
	"C95DC21A-DF0E-4340-8D7B-26CBFA9A03E0": "flatcar-reserved",
}

const sectorSize = 512

// errNoGPT means the image has no (valid) GUID partition table.
// It is the caller's input that is not a disk image: errs.ErrInvalid (exit 2).
var errNoGPT = errs.Invalid(errors.New("no GPT partition table"))

// errInvalidLayout means a checksum-valid GPT whose partitions overlap or lie outside its usable
// range: writing one partition would overwrite another (or the table), so every command refuses it.
var errInvalidLayout = errors.New("invalid GPT layout")

// ReadGPT parses the primary GPT (falling back to the backup at the end of the image when the
// primary is damaged; PrimaryGPTError tells). It is a small parser of our own, not go-diskfs'
// partition/gpt: that one panics or reads tables that are not there on some corrupt headers
// (TestGoDiskfsGPTEvidence, docs/architecture.md), and an image is untrusted input.
func ReadGPT(s vdisk.Disk) ([]Partition, error) {
	parts, errPrimary := readGPTAt(s, 1)
	if errPrimary == nil || errors.Is(errPrimary, errInvalidLayout) || !errors.Is(errPrimary, errNoGPT) {
		// A table whose checksums hold but whose partitions overlap was written that way: the
		// backup says the same, and falling back to it would hide a crafted image. A read
		// failure (a corrupt qcow2) is the answer too.
		return parts, errPrimary
	}
	if last := s.Size()/sectorSize - 1; last > 1 {
		if parts, err := readGPTAt(s, last); err == nil {
			return parts, nil
		}
	}
	return nil, errPrimary
}

// PrimaryGPTError returns why the primary GPT header (LBA 1) cannot be used, or nil when it can;
// when it is not nil and ReadGPT still succeeds, the table was recovered from the backup header.
func PrimaryGPTError(s vdisk.Disk) error {
	_, err := readHeader(s, 1)
	return err
}

// gptHeader is a checksum-verified GPT header with its verified partition array.
type gptHeader struct {
	raw       []byte // the header's hdrSize bytes
	lba       int64
	entries   []byte
	count     int
	entrySize int
}

func (h *gptHeader) u64(off int) uint64 { return binary.LittleEndian.Uint64(h.raw[off:]) }

// setU64 changes a field; seal recomputes the header checksum afterwards.
func (h *gptHeader) setU64(off int, v uint64) { binary.LittleEndian.PutUint64(h.raw[off:], v) }

func (h *gptHeader) seal() {
	binary.LittleEndian.PutUint32(h.raw[16:], 0)
	binary.LittleEndian.PutUint32(h.raw[16:], crc32.ChecksumIEEE(h.raw))
}

// readHeader reads and verifies the GPT header at lba and the partition array it points to.
func readHeader(s vdisk.Disk, lba int64) (*gptHeader, error) {
	hdr := make([]byte, sectorSize)
	if n, err := s.ReadAt(hdr, lba*sectorSize); n < 92 {
		if rerr := vdisk.ReadFailure(err); rerr != nil {
			return nil, fmt.Errorf("reading the GPT header at LBA %d: %w", lba, rerr)
		}
		return nil, fmt.Errorf("%w: image too small", errNoGPT)
	}
	if string(hdr[:8]) != "EFI PART" {
		return nil, fmt.Errorf("%w: no 'EFI PART' signature at LBA %d", errNoGPT, lba)
	}
	hdrSize := binary.LittleEndian.Uint32(hdr[12:])
	if hdrSize < 92 || hdrSize > sectorSize {
		return nil, fmt.Errorf("%w: header size %d out of range", errNoGPT, hdrSize)
	}
	want := binary.LittleEndian.Uint32(hdr[16:])
	h := append([]byte{}, hdr[:hdrSize]...)
	binary.LittleEndian.PutUint32(h[16:], 0)
	if crc32.ChecksumIEEE(h) != want {
		return nil, fmt.Errorf("%w: header checksum mismatch at LBA %d", errNoGPT, lba)
	}
	binary.LittleEndian.PutUint32(h[16:], want)
	entriesLBA := int64(binary.LittleEndian.Uint64(hdr[72:]))
	count := binary.LittleEndian.Uint32(hdr[80:])
	entrySize := binary.LittleEndian.Uint32(hdr[84:])
	if entrySize < 128 || entrySize > 4096 || entrySize%8 != 0 || count == 0 || count > 1024 {
		return nil, fmt.Errorf("%w: %d entries of %d bytes is out of range", errNoGPT, count, entrySize)
	}
	if entriesLBA < 1 || entriesLBA > s.Size()/sectorSize {
		return nil, fmt.Errorf("%w: partition array at LBA %d is outside the image", errNoGPT, entriesLBA)
	}
	arr := make([]byte, int(count)*int(entrySize))
	if n, err := s.ReadAt(arr, entriesLBA*sectorSize); n != len(arr) {
		if rerr := vdisk.ReadFailure(err); rerr != nil {
			return nil, fmt.Errorf("reading the GPT partition array at LBA %d: %w", entriesLBA, rerr)
		}
		return nil, fmt.Errorf("%w: partition array truncated", errNoGPT)
	}
	if crc32.ChecksumIEEE(arr) != binary.LittleEndian.Uint32(hdr[88:]) {
		return nil, fmt.Errorf("%w: partition array checksum mismatch", errNoGPT)
	}
	return &gptHeader{raw: h, lba: lba, entries: arr, count: int(count), entrySize: int(entrySize)}, nil
}

func readGPTAt(s vdisk.Disk, lba int64) ([]Partition, error) {
	h, err := readHeader(s, lba)
	if err != nil {
		return nil, err
	}
	arr, count, entrySize := h.entries, h.count, h.entrySize
	var parts []Partition
	for i := 0; i < count; i++ {
		e := arr[i*entrySize : (i+1)*entrySize]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		first := binary.LittleEndian.Uint64(e[32:])
		last := binary.LittleEndian.Uint64(e[40:])
		if last < first || last >= uint64(1)<<54 {
			return nil, fmt.Errorf("%w: entry %d has an invalid range %d-%d", errNoGPT, i+1, first, last)
		}
		parts = append(parts, Partition{
			Number:   i + 1,
			Name:     decodeName(e[56:128]),
			TypeGUID: guidString(e[0:16]),
			UUID:     guidString(e[16:32]),
			Start:    int64(first) * sectorSize,
			Size:     int64(last-first+1) * sectorSize,
		})
	}
	if err := checkLayout(parts, int64(h.u64(40)), int64(h.u64(48))); err != nil {
		return nil, err
	}
	return parts, nil
}

// checkLayout refuses partitions outside the usable LBAs [firstUsable, lastUsable] of the header
// and partitions that share a sector.
func checkLayout(parts []Partition, firstUsable, lastUsable int64) error {
	lbas := func(p Partition) (int64, int64) { return p.Start / sectorSize, (p.Start+p.Size)/sectorSize - 1 }
	desc := func(p Partition) string {
		first, last := lbas(p)
		return fmt.Sprintf("partition %d (%s, LBA %d-%d)", p.Number, p.Name, first, last)
	}
	for _, p := range parts {
		if first, last := lbas(p); first < firstUsable || last > lastUsable {
			return fmt.Errorf("%w: %s lies outside the usable LBA range %d-%d of the GPT (over the partition table); a damaged or crafted image", errInvalidLayout, desc(p), firstUsable, lastUsable)
		}
	}
	byStart := append([]Partition{}, parts...)
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })
	var reach Partition // of those before p, the one that ends last
	for i, p := range byStart {
		if i > 0 && p.Start < reach.Start+reach.Size {
			return fmt.Errorf("%w: %s overlaps %s, so writing one would overwrite the other; a damaged or crafted image", errInvalidLayout, desc(reach), desc(p))
		}
		if i == 0 || p.Start+p.Size > reach.Start+reach.Size {
			reach = p
		}
	}
	return nil
}

func decodeName(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// guidString renders a GPT mixed-endian GUID.
func guidString(b []byte) string {
	return strings.ToUpper(fmt.Sprintf("%08X-%04X-%04X-%X-%X",
		binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16]))
}

// Partitions returns the image's GPT, parsed once per image.
func (img *Image) Partitions() ([]Partition, error) {
	if img.parts == nil && img.perr == nil {
		img.parts, img.perr = ReadGPT(img.Disk)
		if img.perr != nil && !errors.Is(img.perr, errNoGPT) {
			img.perr = fmt.Errorf("%s: %w", img.Path, img.perr)
		} else if img.perr != nil {
			img.perr = fmt.Errorf("%s: %w; is this a Flatcar disk image?", img.Path, img.perr)
		} else if img.parts == nil {
			img.parts = []Partition{}
		}
	}
	return img.parts, img.perr
}

// Find is the one lookup of a partition by its GPT name (Flatcar's layout changes sizes between
// releases, so never by offset).
func Find(parts []Partition, name string) (Partition, bool) {
	for _, p := range parts {
		if p.Name == name {
			return p, true
		}
	}
	return Partition{}, false
}

// FindPartition finds a partition by its GPT name and checks it lies inside the image.
func (img *Image) FindPartition(name string) (Partition, error) {
	parts, err := img.Partitions()
	if err != nil {
		return Partition{}, err
	}
	p, ok := Find(parts, name)
	if !ok {
		var names []string
		for _, p := range parts {
			names = append(names, p.Name)
		}
		return Partition{}, fmt.Errorf("%s: the GPT has no partition named %q (found: %s); is this a Flatcar image?", img.Path, name, strings.Join(names, ", "))
	}
	if p.Start+p.Size > img.Size() {
		return Partition{}, fmt.Errorf("%s: partition %d (%s) ends past the end of the image (truncated file?)", img.Path, p.Number, name)
	}
	return p, nil
}

// Section returns partition p as a bounded read/write range.
func (img *Image) Section(p Partition) *vdisk.Section {
	return vdisk.NewSection(img.Disk, p.Start, p.Size)
}

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
