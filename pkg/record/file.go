package record

import (
	"encoding/json"
	"errors"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Path is where the build record of an artifact lives.
func Path(artifact string) string { return artifact + ".build.json" }

// Read reads the record next to artifact.
func Read(artifact string) (*Record, error) {
	b, err := infile.ReadFile("build record", Path(artifact), infile.Record)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Load reads the record next to an image given to upload: a missing one is an empty record, an
// unreadable or broken one wraps errs.ErrInvalid (it came with the caller's image).
func Load(image string) (*Record, error) {
	r, err := Read(image)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &Record{}, nil
	case err != nil:
		return nil, errs.Invalidf("%s is not a valid build record: %w", Path(image), err)
	}
	return r, nil
}

// ReadFlag reads a record the caller names (manifests --from-record): one that cannot be read,
// or is not a build record (no image name), wraps errs.ErrInvalid.
func ReadFlag(path string) (*Record, error) {
	b, err := infile.ReadFile("--from-record", path, infile.Record)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errs.Invalidf("--from-record %s is not a build record (the .build.json next to a built image): %v", path, err)
	}
	if r.ImageName == "" {
		return nil, errs.Invalidf("--from-record %s is not a build record (the .build.json next to a built image): it has no imageName", path)
	}
	return &r, nil
}

// Write stores the record next to artifact, atomically. The record is world-readable: no URL
// credential or registered secret goes into it.
func (r *Record) Write(artifact string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(Path(artifact), []byte(redact.Known(string(b))+"\n"), 0o644)
}
