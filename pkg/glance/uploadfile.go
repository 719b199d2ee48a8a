package glance

import (
	"context"
	"io"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

// FileUpload is `upload`'s: the file and how to send it, the image's name and metadata flags,
// the clouds, and the build record and signing key the caller reads.
type FileUpload struct {
	File       string
	DiskFormat disk.Format // "": the file's own
	Clouds     []string
	Name       string
	Visibility string
	OnExists   string
	Wait       time.Duration
	// Metadata is the flags' part; its Record and VirtualSize are filled here.
	Metadata MetadataInput
	// Signing reads --sign-key and its certificate (nil, nil: unsigned); nil: never signed.
	Signing func() (*Signing, error)
	// Record reads the build record beside the file (empty values when there is none).
	Record   func(file string) (RecordValues, error)
	Log      io.Writer
	Progress progress.Func
}

// UploadFile checks u, opens the file, makes its metadata from the flags and its record, and
// uploads it to every cloud as UploadAll: the results of the clouds that got the image come
// with the error of those that did not.
func UploadFile(ctx context.Context, u FileUpload) ([]*Result, error) {
	req := &Request{Name: u.Name, Visibility: u.Visibility, Wait: u.Wait}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	mode, err := ParseOnExists(u.OnExists)
	if err != nil {
		return nil, err
	}
	req.OnExists = mode
	if u.Signing != nil {
		if req.Signing, err = u.Signing(); err != nil {
			return nil, err
		}
	}
	if err := req.SetFile(u.File, u.DiskFormat); err != nil {
		return nil, err // a compressed or foreign image is a failure (exit 1), like in every command
	}
	if u.Record != nil {
		if u.Metadata.Record, err = u.Record(u.File); err != nil {
			return nil, err
		}
	}
	u.Metadata.VirtualSize = req.VirtualSize
	if req.Metadata, err = BuildMetadata(u.Metadata); err != nil {
		return nil, err
	}
	req.Log, req.Progress = u.Log, u.Progress
	return UploadAll(ctx, u.Clouds, req)
}
