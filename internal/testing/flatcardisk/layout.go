package flatcardisk

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

const (
	mib   = int64(1) << 20
	align = 2 * mib // Flatcar's part_alignment: 4096 sectors of 512 bytes
)

// Type GUIDs of the layout's partition types (FACTS: Flatcar disk and boot chain).
var typeGUIDs = map[string]string{
	"efi":              "C12A7328-F81F-11D2-BA4B-00A0C93EC93B",
	"bios":             "21686148-6449-6E6F-744E-656564454649",
	"flatcar-rootfs":   "5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6",
	"data":             "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
	"flatcar-reserved": "C95DC21A-DF0E-4340-8D7B-26CBFA9A03E0",
	"flatcar-resize":   "3884DD41-8582-4404-B9A8-E9B84F2DF50E",
}

// scaledSizes are the test fixture's partition sizes by GPT name (Flatcar's are larger; the names,
// numbers, types and 2 MiB alignment are Flatcar's). OEM and ROOT are sized from Options.
var scaledSizes = map[string]int64{
	"EFI-SYSTEM": 64 * mib,
	"BIOS-BOOT":  2 * mib,
	"USR-A":      64 * mib,
	"USR-B":      64 * mib,
	"OEM-CONFIG": 64 * mib,
}

// part is one partition of the disk to build.
type part struct {
	Number   int
	Name     string
	TypeGUID string
	UUID     string
	Start    int64 // bytes
	Size     int64 // bytes
	Attrs    uint64
}

type layoutFile struct {
	Layouts map[string]map[string]struct {
		Label  string `json:"label"`
		Type   string `json:"type"`
		UUID   string `json:"uuid"`
		Blocks string `json:"blocks"`
	} `json:"layouts"`
}

// layoutPath is Flatcar's disk layout (build_library/disk_layout.json) committed in testdata/.
func layoutPath() string { return testutil.Testdata("flatcar-disk-layout.json") }

// plan reads Flatcar's base layout and places its partitions, in number order, 2 MiB aligned,
// with scaled-down sizes. Zero-size ("blank") entries such as 5 and 8 get no GPT entry.
func plan(opts Options) ([]part, error) {
	raw, err := os.ReadFile(layoutPath())
	if err != nil {
		return nil, fmt.Errorf("reading Flatcar's disk layout: %w", err)
	}
	var lf layoutFile
	if err := json.Unmarshal(raw, &lf); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", layoutPath(), err)
	}
	base := lf.Layouts["base"]
	var nums []int
	for k := range base {
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("%s: partition key %q is not a number", layoutPath(), k)
		}
		nums = append(nums, n)
	}
	sort.Ints(nums)

	diskSize := opts.diskSize()
	next := align
	var parts []part
	for _, n := range nums {
		e := base[strconv.Itoa(n)]
		if e.Type == "blank" || e.Blocks == "0" {
			continue
		}
		if e.Label == "OEM" && opts.OEM == OEMNone {
			continue
		}
		guid, ok := typeGUIDs[e.Type]
		if !ok {
			return nil, fmt.Errorf("%s: partition %d has unknown type %q", layoutPath(), n, e.Type)
		}
		p := part{Number: n, Name: e.Label, TypeGUID: guid, UUID: e.UUID, Start: next}
		if p.UUID == "" {
			p.UUID = stableUUID(e.Label)
		}
		switch e.Label {
		case "OEM":
			p.Size = opts.oemSize()
		case "USR-A":
			p.Size = opts.usrASize()
		case "ROOT":
			// ROOT takes the rest, leaving room for the backup GPT (33 sectors) at the end.
			p.Size = (diskSize - 33*512 - next) / align * align
		default:
			p.Size = scaledSizes[e.Label]
			if p.Size == 0 {
				return nil, fmt.Errorf("no scaled size for partition %q", e.Label)
			}
		}
		if e.Label == "USR-A" {
			// gptprio: priority 1, successful 1 (the active /usr of a fresh image).
			p.Attrs = 1<<48 | 1<<56
		}
		if p.Size < 2*mib {
			return nil, fmt.Errorf("disk size %d is too small for Flatcar's layout (partition %s would be %d bytes)", diskSize, e.Label, p.Size)
		}
		parts = append(parts, p)
		next = p.Start + p.Size
	}
	return parts, nil
}

// stableUUID derives a fixed partition UUID from a name so identical options give identical disks.
func stableUUID(name string) string {
	h := sha256.Sum256([]byte("flatcar-capo test disk " + name))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func findPart(parts []part, name string) (part, bool) {
	for _, p := range parts {
		if p.Name == name {
			return p, true
		}
	}
	return part{}, false
}
