package verify

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/inspect"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// Mismatch is one component where the image's contents are not what its signed SBOM says.
type Mismatch struct {
	Component  string `json:"component"`  // "sysext kubernetes-v1.31.0-x86-64.raw", "file /opt/bin/kubeadm", "image registry.k8s.io/pause:3.10 linux/amd64"
	Expected   string `json:"expected"`   // "none" when the SBOM does not list it
	ExpectedBy string `json:"expectedBy"` // "the SBOM", or "the record" for the SBOM's own sha256
	Found      string `json:"found"`      // "none" when the image lacks it
	FoundIn    string `json:"foundIn"`    // "the image", or the SBOM file
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: %s says %s, %s holds %s", m.Component, m.ExpectedBy, m.Expected, m.FoundIn, m.Found)
}

// checkContents compares what the image really holds, read as `inspect --sbom-file` reads it,
// with the SBOM the record names: the SBOM's sha256 is the record's, each sysext's sha512,
// each /opt/bin and /opt/cni/bin file the SBOM lists (a download that is the binary itself),
// and every preloaded image digest, both ways.
func (v *Result) checkContents(ctx context.Context, artifact string, rec *record.Record, b []byte) {
	fail := func(format string, a ...any) {
		v.OK = false
		v.ContentsError = fmt.Sprintf(format, a...)
	}
	if got := sha256Hex(b); got != rec.SBOM.SHA256 {
		v.mismatch(Mismatch{Component: "SBOM " + rec.SBOM.File, Expected: "sha256 " + rec.SBOM.SHA256, ExpectedBy: "the record",
			Found: "sha256 " + got, FoundIn: "the file"})
	}
	claimed, err := sbom.Read(b)
	if err != nil {
		fail("the SBOM %s: %v", rec.SBOM.File, err)
		return
	}
	found, err := func() (sbom.Inventory, error) {
		img, err := disk.Open(artifact, false)
		if err != nil {
			return sbom.Inventory{}, err
		}
		defer img.Close()
		r, err := inspect.Inspect(img, "")
		if err != nil {
			return sbom.Inventory{}, err
		}
		return inspect.SBOM(ctx, img, r, "")
	}()
	if err != nil {
		fail("the image's contents cannot be read to check them against the SBOM: %v", err)
		return
	}
	v.compare(claimed, found)
}

func (v *Result) mismatch(m Mismatch) {
	if m.ExpectedBy == "" {
		m.ExpectedBy, m.FoundIn = "the SBOM", "the image"
	}
	v.OK = false
	v.Mismatches = append(v.Mismatches, m)
}

func (v *Result) compare(claimed, found sbom.Inventory) {
	// Sysexts, by file name: each one the SBOM lists, and none more.
	have := map[string]string{}
	for _, s := range found.Sysexts {
		have[s.File] = s.SHA512
	}
	for _, s := range claimed.Sysexts {
		v.check("sysext "+s.File, "sha512 ", s.SHA512, have[s.File])
		delete(have, s.File)
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		v.mismatch(Mismatch{Component: "sysext " + name, Expected: "none", Found: "sha512 " + have[name]})
	}
	// Binaries: a file the image keeps in /opt/bin or /opt/cni/bin that the SBOM lists as the
	// binary itself (by its path, or a download of that name; crictl's and the CNI plugins'
	// archives are not the files they unpack to).
	files := map[string]sbom.File{}
	for _, f := range found.Files {
		files[f.Path] = f
		if _, dup := files[f.Name]; !dup {
			files[f.Name] = f
		}
	}
	for _, f := range claimed.Files {
		key := f.Path
		if key == "" {
			if f.URL == "" || path.Base(f.URL) != f.Name {
				continue
			}
			key = f.Name
		}
		if got, ok := files[key]; ok {
			v.check("file "+got.Path, "sha256 ", f.SHA256, got.SHA256)
		} else if f.Path != "" {
			v.check("file "+f.Path, "sha256 ", f.SHA256, "")
		}
	}
	// Preloaded images, by reference and platform: each digest the SBOM lists, and none more.
	digests := map[string]string{}
	for _, im := range found.Images {
		digests[im.Ref+" "+im.Platform] = im.Digest
	}
	for _, im := range claimed.Images {
		k := im.Ref + " " + im.Platform
		v.check("image "+k, "", im.Digest, digests[k])
		delete(digests, k)
	}
	for _, k := range slices.Sorted(maps.Keys(digests)) {
		v.mismatch(Mismatch{Component: "image " + k, Expected: "none", Found: digests[k]})
	}
}

// check counts one component and records it when the image's value is not the SBOM's.
func (v *Result) check(component, label, want, got string) {
	v.ContentsChecked++
	if want == got {
		return
	}
	m := Mismatch{Component: component, Expected: label + want, Found: label + got}
	if got == "" {
		m.Found = "none"
	}
	v.mismatch(m)
}
