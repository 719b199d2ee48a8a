package imagebuild

import (
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// Verification is what `flatcar-capo verify` found for one artifact.
type Verification struct {
	Artifact string         `json:"artifact"`
	Files    []VerifiedFile `json:"files"`
	// SHA512 is the artifact's, compared with the one its (signed) record holds.
	SHA512 string `json:"sha512"`
	OK     bool   `json:"ok"`
	// ContentsChecked counts the components of the signed SBOM compared with what the image
	// holds (verify_contents.go); Mismatches are those that differ.
	ContentsChecked int        `json:"contentsChecked"`
	Mismatches      []Mismatch `json:"mismatches,omitempty"`
	ContentsError   string     `json:"contentsError,omitempty"` // why the contents could not be checked
	// Notes say what was not checked (no SBOM named in the record).
	Notes []string `json:"notes,omitempty"`
}

// VerifiedFile is one signed file and its verdict.
type VerifiedFile struct {
	File      string `json:"file"`
	Signature string `json:"signature"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
}

// VerifyArtifact checks what --sign-key signed for artifact with pub: each file's detached
// signature (as cosign verify-blob does), and that the artifact is the one its record describes
// (the record's sha512, the record being signed itself), and that the image holds what the SBOM
// the record names says (verify_contents.go). A missing record or key is the caller's
// input (errs.ErrInvalid); a signature that fails is a finding, reported in the Verification.
func VerifyArtifact(artifact string, pub crypto.PublicKey) (*Verification, error) {
	if st, err := os.Stat(artifact); err != nil {
		return nil, errs.Invalidf("ARTIFACT %s: not a readable file (%v)", artifact, err)
	} else if !st.Mode().IsRegular() {
		return nil, errs.Invalidf("ARTIFACT %s is %s, not the image file build wrote", artifact, infile.Describe(st.Mode()))
	}
	files, err := SignedFiles(artifact)
	if err != nil {
		return nil, errs.Invalidf("%s has no build record %s to verify (%v): verify checks what build --sign-key wrote", artifact, RecordPath(artifact), err)
	}
	v := &Verification{Artifact: artifact, OK: true}
	for _, f := range files {
		vf := VerifiedFile{File: filepath.Base(f), Signature: filepath.Base(f) + signing.SigSuffix, OK: true}
		err := signing.VerifyFile(pub, f, f+signing.SigSuffix)
		switch {
		case errors.Is(err, errs.ErrInvalid):
			return nil, err
		case errors.Is(err, signing.ErrBadSignature):
			vf.Problem = "the signature does not verify with this key: the file was changed, or signed by another key"
		case errors.Is(err, os.ErrNotExist):
			vf.Problem = "missing: " + err.Error()
		case err != nil:
			vf.Problem = err.Error()
		}
		if vf.Problem != "" {
			vf.OK, v.OK = false, false
		}
		v.Files = append(v.Files, vf)
	}
	if len(files) < 3 {
		v.Notes = append(v.Notes, "the record names no SBOM: only the image and its record were checked")
	}
	rec, err := ReadRecord(artifact)
	if err != nil {
		return nil, errs.Invalidf("%s is not a build record: %v", RecordPath(artifact), err)
	}
	sum, _, err := digest.SHA512(artifact)
	if err != nil {
		return nil, err
	}
	v.SHA512 = sum
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].SHA512 != sum {
		want := "none"
		if len(rec.Artifacts) > 0 {
			want = rec.Artifacts[0].SHA512
		}
		v.OK = false
		v.Notes = append(v.Notes, fmt.Sprintf("the image's sha512 %s... is not the record's (%s): it is not the image the record describes", short(sum), short(want)))
	}
	if rec.SBOM != nil {
		v.checkContents(artifact, rec)
	}
	return v, nil
}

// Problems lists what failed, one line each.
func (v *Verification) Problems() string {
	var p []string
	for _, f := range v.Files {
		if !f.OK {
			p = append(p, f.File+": "+f.Problem)
		}
	}
	for _, n := range v.Notes {
		if strings.HasPrefix(n, "the image's sha512") {
			p = append(p, n)
		}
	}
	for _, m := range v.Mismatches {
		p = append(p, m.String())
	}
	if v.ContentsError != "" {
		p = append(p, v.ContentsError)
	}
	return strings.Join(p, "; ")
}

func short(s string) string { return s[:min(len(s), 16)] }
