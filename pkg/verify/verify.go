// Package verify is `flatcar-capo verify`: it checks, offline, what build --sign-key signed for an
// artifact (the image, its build record and the SBOM the record names) and that the image holds
// what that SBOM says.
package verify

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// Result is what `flatcar-capo verify` found for one artifact.
type Result struct {
	Artifact string       `json:"artifact"`
	Files    []SignedFile `json:"files"`
	// SHA512 is the artifact's, compared with the one its (signed) record holds.
	SHA512 string `json:"sha512"`
	OK     bool   `json:"ok"`
	// What the signed record says the image is (shown so a user sees which image passed).
	ImageName         string `json:"imageName"`
	FlatcarVersion    string `json:"flatcarVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Method            string `json:"method"`
	// ContentsChecked counts the components of the signed SBOM compared with what the image
	// holds (contents.go); Mismatches are those that differ.
	ContentsChecked int        `json:"contentsChecked"`
	Mismatches      []Mismatch `json:"mismatches,omitempty"`
	ContentsError   string     `json:"contentsError,omitempty"` // why the contents could not be checked
	// Notes say what was not checked (no SBOM named in the record).
	Notes []string `json:"notes,omitempty"`
}

// SignedFile is one signed file and its verdict.
type SignedFile struct {
	File      string `json:"file"`
	Signature string `json:"signature"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
}

// Artifact checks what --sign-key signed for artifact with pub: each file's detached
// signature (as cosign verify-blob does), and that the artifact is the one its record describes
// (its file name and the record's sha512, the record being signed itself), and, when every
// signature verifies, that the image holds what the SBOM the record names says
// (contents.go). The record, the SBOM and the signatures are read through infile (no pipe
// or device, bounded sizes); hashing the image stops when ctx is cancelled. A missing record or
// key is the caller's input (errs.ErrInvalid); a signature that fails is a finding, reported in
// the Result.
func Artifact(ctx context.Context, artifact string, pub crypto.PublicKey) (*Result, error) {
	if st, err := os.Stat(artifact); err != nil {
		return nil, errs.Invalidf("ARTIFACT %s: not a readable file (%v)", artifact, err)
	} else if !st.Mode().IsRegular() {
		return nil, errs.Invalidf("ARTIFACT %s is %s, not the image file build wrote", artifact, infile.Describe(st.Mode()))
	}
	recBytes, err := infile.ReadFile("build record", record.Path(artifact), infile.Record)
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) {
			return nil, err
		}
		return nil, errs.Invalidf("%s has no build record %s to verify (%v): verify checks what build --sign-key wrote", artifact, record.Path(artifact), err)
	}
	var rec record.Record
	if err := json.Unmarshal(recBytes, &rec); err != nil {
		return nil, errs.Invalidf("%s is not a build record: %v", record.Path(artifact), err)
	}
	v := &Result{Artifact: artifact, OK: true, ImageName: rec.ImageName, FlatcarVersion: rec.FlatcarVersion,
		KubernetesVersion: rec.KubernetesVersion, Method: rec.Method}
	// The image, hashed once for its signature (sha256) and the record (sha512).
	sums, _, err := digest.FilesContext(ctx, artifact, sha256.New(), sha512.New())
	if err != nil {
		return nil, err
	}
	v.SHA512 = sums[1]
	if err := v.verifySignature(pub, artifact, sums[0], nil); err != nil {
		return nil, err
	}
	if err := v.verifySignature(pub, record.Path(artifact), sha256Hex(recBytes), nil); err != nil {
		return nil, err
	}
	var sbomBytes []byte
	if p := rec.SBOMPath(artifact); p != "" {
		if sbomBytes, err = infile.ReadFile("SBOM", p, infile.SBOM); errors.Is(err, errs.ErrInvalid) {
			return nil, err
		}
		if err := v.verifySignature(pub, p, sha256Hex(sbomBytes), err); err != nil {
			return nil, err
		}
	} else {
		v.Notes = append(v.Notes, "the record names no SBOM: only the image and its record were checked")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The record describes this image: its file name (a signed image renamed is another
	// image's name), and its sha512.
	if want := recordedFile(&rec); want != filepath.Base(artifact) {
		v.OK = false
		v.Notes = append(v.Notes, fmt.Sprintf("%s: the record describes %s, not %s: the signed image was renamed or copied over another's name; give it its own name back (%s) or verify the image by the name it was built under",
			problemName, want, filepath.Base(artifact), want))
	}
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].SHA512 != v.SHA512 {
		want := "none"
		if len(rec.Artifacts) > 0 {
			want = rec.Artifacts[0].SHA512
		}
		v.OK = false
		v.Notes = append(v.Notes, fmt.Sprintf("the image's sha512 %s... is not the record's (%s): it is not the image the record describes", short(v.SHA512), short(want)))
	}
	switch {
	case sbomBytes == nil:
	case !v.signaturesOK():
		// An SBOM or record that is not what was signed says nothing: reading the image to
		// compare it would be work for no verdict.
		v.Notes = append(v.Notes, "the contents were not checked against the SBOM: a signature failed, so the record and SBOM are not the ones signed")
	default:
		v.checkContents(ctx, artifact, &rec, sbomBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return v, nil
}

// problemName starts a note that Problems lists as a failure.
const problemName = "name"

// recordedFile is the artifact's file name the record gives ("none").
func recordedFile(rec *record.Record) string {
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].File == "" {
		return "none"
	}
	return rec.Artifacts[0].File
}

// verifySignature checks path's detached signature against its sha256 and adds the verdict;
// readErr is why path itself could not be read. A signature that cannot be a signature (a pipe,
// a device, a huge file) or a key that cannot verify is the caller's input: returned.
func (v *Result) verifySignature(pub crypto.PublicKey, path, sum string, readErr error) error {
	vf := SignedFile{File: filepath.Base(path), Signature: filepath.Base(path) + signing.SigSuffix, OK: true}
	err := readErr
	if err == nil {
		err = signing.VerifySHA256(pub, sum, path+signing.SigSuffix)
	}
	switch {
	case errors.Is(err, errs.ErrInvalid):
		return err
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
	return nil
}

func (v *Result) signaturesOK() bool {
	for _, f := range v.Files {
		if !f.OK {
			return false
		}
	}
	return true
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Problems lists what failed, one line each.
func (v *Result) Problems() string {
	var p []string
	for _, f := range v.Files {
		if !f.OK {
			p = append(p, f.File+": "+f.Problem)
		}
	}
	for _, n := range v.Notes {
		if strings.HasPrefix(n, "the image's sha512") || strings.HasPrefix(n, problemName+": ") {
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
