package glance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
)

// SetFile points req at the image file and the disk format to send it as: "" keeps the file's
// own format (from its header), qcow2 streams a raw file as qcow2 on the way (no temporary
// file), raw refuses a qcow2 file. A wrong diskFormat, or a file that is no disk image (disk.ErrNotDiskImage),
// wraps errs.ErrInvalid; a disk image in a format we do not upload (compressed, VHD) does not.
func (r *Request) SetFile(file string, diskFormat disk.Format) error {
	format, size, err := DetectFileFormat(file)
	if err != nil {
		if errors.Is(err, disk.ErrNotDiskImage) && !errors.As(err, new(*disk.UnsupportedFormatError)) {
			err = errs.Invalid(err)
		}
		return err
	}
	virtual := size
	if format == disk.FormatQcow2 {
		if virtual, err = qcow2VirtualSize(file); err != nil {
			return err
		}
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
		// Ceph-backed Glance wants raw: the qcow2's virtual disk is streamed (holes read as
		// zeros), its length known up front, no temporary file.
		open, size, format = Qcow2AsRaw(file), virtual, disk.FormatRaw
	default:
		return errs.Invalidf("invalid --disk-format %q: must be qcow2 or raw", diskFormat)
	}
	r.File, r.Open, r.Format, r.Size, r.VirtualSize = file, open, format, size, virtual
	return nil
}

// CloudErrors are the failures of an upload to several clouds, one per failed cloud, in the
// order the clouds were given. They wrap errs.ErrInvalid only when every one does.
type CloudErrors []error

func (e CloudErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap gives errors.Is and errors.As every cloud's error. The upload is the caller's mistake
// (errs.ErrInvalid, exit 2) only when every cloud failed on its configuration; when one failed
// on the work, the others' configuration errors are still reported but not marked.
func (e CloudErrors) Unwrap() []error {
	if len(e) > 0 && !slices.ContainsFunc(e, func(err error) bool { return !errors.Is(err, errs.ErrInvalid) }) {
		return e
	}
	out := make([]error, len(e))
	for i, err := range e {
		out[i] = err
		if errors.Is(err, errs.ErrInvalid) {
			out[i] = unmarked{err.Error()}
		}
	}
	return out
}

// unmarked is an error's message without its chain.
type unmarked struct{ msg string }

func (e unmarked) Error() string { return e.msg }

// UploadAll uploads req to every cloud concurrently ("" is OS_CLOUD, then the OS_* variables).
// It returns the results of the clouds that succeeded, in the given order, and a CloudErrors
// naming each cloud that failed (nil when none did). This is what `upload` and build's upload
// step call. A cloud named twice, or two names for the same Glance endpoint and project, get
// one upload (two would race for the same image name and fail each other): the later names
// get the first one's image, action "reused".
func UploadAll(ctx context.Context, clouds []string, req *Request) ([]*Result, error) {
	if len(clouds) == 0 {
		clouds = []string{""}
	}
	seen := map[string]bool{}
	clouds = slices.DeleteFunc(slices.Clone(clouds), func(n string) bool {
		dup := seen[n]
		seen[n] = true
		return dup
	})
	type outcome struct {
		cloud *Cloud
		res   *Result
		err   error
	}
	outcomes := make([]outcome, len(clouds))
	var wg sync.WaitGroup
	for i, name := range clouds {
		wg.Go(func() {
			outcomes[i].cloud, outcomes[i].err = Connect(ctx, name)
		})
	}
	wg.Wait()
	first := map[string]int{} // endpoint+project -> the index that uploads
	same := make([]int, len(clouds))
	for i, o := range outcomes {
		same[i] = -1
		if o.err != nil {
			continue
		}
		k := o.cloud.target()
		if j, ok := first[k]; ok {
			same[i] = j
			fmt.Fprintf(req.log(), "%s: the same Glance and project as %s; uploading once\n", o.cloud.Label(), outcomes[j].cloud.Label())
			continue
		}
		first[k] = i
	}
	for i := range outcomes {
		if outcomes[i].err != nil || same[i] >= 0 {
			continue
		}
		wg.Go(func() {
			c := outcomes[i].cloud
			res, err := Upload(ctx, c, req)
			if err != nil {
				err = fmt.Errorf("%s: %w", c.Label(), err)
			}
			outcomes[i].res, outcomes[i].err = res, err
		})
	}
	wg.Wait()
	for i, j := range same {
		if j < 0 {
			continue
		}
		if outcomes[j].err != nil {
			outcomes[i].err = fmt.Errorf("%s: not uploaded: it is the same Glance and project as %s, which failed", outcomes[i].cloud.Label(), outcomes[j].cloud.Label())
			continue
		}
		r := *outcomes[j].res
		r.Cloud, r.Region, r.Action = outcomes[i].cloud.Name, outcomes[i].cloud.Region, "reused"
		r.RemovedLeftovers, r.Replaced = nil, nil
		outcomes[i].res = &r
	}
	var results []*Result
	var errs CloudErrors
	for i, o := range outcomes {
		if o.res != nil && o.err == nil {
			results = append(results, o.res)
		}
		if o.err != nil {
			// A cloud stopped before it created anything says so too, so the report covers all.
			if interrupt.IsCancel(o.err) && !errors.As(o.err, new(*interrupt.Error)) {
				name := cmp.Or(clouds[i], "the default cloud")
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

// target identifies what an upload writes to: the Glance endpoint and the project that owns
// the image.
func (c *Cloud) target() string {
	return strings.TrimRight(c.Image.Endpoint, "/") + " " + c.Project
}
