package glance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
)

// SetFile points req at the image file and the disk format to send it as: "" keeps the file's
// own format (from its header), qcow2 streams a raw file as qcow2 on the way (no temporary
// file), raw refuses a qcow2 file. A wrong diskFormat is a config error (IsConfigError); a file
// that is no disk image wraps ErrNotDiskImage.
func (r *Request) SetFile(file string, diskFormat disk.Format) error {
	format, size, err := DetectFileFormat(file)
	if err != nil {
		return err
	}
	var open Opener
	switch {
	case diskFormat == "" || diskFormat == format:
	case diskFormat == disk.FormatQcow2 && format == disk.FormatRaw:
		if open, size, err = RawAsQcow2(file); err != nil {
			return err
		}
		format = disk.FormatQcow2
	case diskFormat == disk.FormatRaw:
		return configErrorf("--disk-format raw: %s is qcow2; convert it first (flatcar-capo convert)", file)
	default:
		return configErrorf("invalid --disk-format %q: must be qcow2 or raw", diskFormat)
	}
	r.File, r.Open, r.Format, r.Size = file, open, format, size
	return nil
}

// CloudErrors are the failures of an upload to several clouds, one per failed cloud, in the
// order the clouds were given. IsConfigError is true only when every one is a config error.
type CloudErrors []error

func (e CloudErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

func (e CloudErrors) Unwrap() []error { return e }

// UploadAll uploads req to every cloud concurrently ("" is OS_CLOUD, then the OS_* variables).
// It returns the results of the clouds that succeeded, in the given order, and a CloudErrors
// naming each cloud that failed (nil when none did). This is what `upload` and build's upload
// step call.
func UploadAll(ctx context.Context, clouds []string, req *Request) ([]*Result, error) {
	if len(clouds) == 0 {
		clouds = []string{""}
	}
	type outcome struct {
		res *Result
		err error
	}
	outcomes := make([]outcome, len(clouds))
	var wg sync.WaitGroup
	for i, name := range clouds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Connect(ctx, name)
			if err != nil {
				outcomes[i].err = err
				return
			}
			res, err := Upload(ctx, c, req)
			if err != nil {
				err = fmt.Errorf("%s: %w", c.Label(), err)
			}
			outcomes[i] = outcome{res, err}
		}()
	}
	wg.Wait()
	var results []*Result
	var errs CloudErrors
	for i, o := range outcomes {
		if o.res != nil && o.err == nil {
			results = append(results, o.res)
		}
		if o.err != nil {
			// A cloud stopped before it created anything says so too, so the report covers all.
			var typed *interrupt.Error
			if interrupt.IsCancel(o.err) && !errors.As(o.err, &typed) {
				name := clouds[i]
				if name == "" {
					name = "the default cloud"
				}
				o.err = interrupt.Nothing(o.err, name+": no image was created")
			}
			errs = append(errs, o.err)
		}
	}
	if len(errs) == 0 {
		return results, nil
	}
	return results, errs
}

// allConfigErrors is IsConfigError for CloudErrors: every cloud failed on its configuration.
func allConfigErrors(err error) (verdict, ok bool) {
	var multi CloudErrors
	if !errors.As(err, &multi) {
		return false, false
	}
	for _, e := range multi {
		if !IsConfigError(e) {
			return false, true
		}
	}
	return len(multi) > 0, true
}
