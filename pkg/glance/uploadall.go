package glance

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
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
		if open, size, err = rawAsQcow2(file); err != nil {
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
	// Metadata is the flags' part; its Record (the build record beside File, record.Load) and
	// VirtualSize are filled here.
	Metadata MetadataInput
	// Signing reads --sign-key and its certificate (nil, nil: unsigned); nil: never signed.
	Signing  func() (*Signing, error)
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
	warnHybridMBR(u.File, u.Log)
	rec, err := record.Load(u.File)
	if err != nil {
		return nil, err
	}
	u.Metadata.Record = *rec
	if err := RefuseSecretsInPublic(u.Visibility, rec.CarriesSecrets); err != nil {
		return nil, err
	}
	u.Metadata.VirtualSize = req.VirtualSize
	if req.Metadata, err = BuildMetadata(u.Metadata); err != nil {
		return nil, err
	}
	req.Log, req.Progress = u.Log, u.Progress
	return UploadAll(ctx, u.Clouds, req)
}

// DetectFileFormat checks that path is an image Glance can take as qcow2 or raw and returns its
// format (from the header, never the extension) and size.
func DetectFileFormat(path string) (disk.Format, int64, error) {
	f, st, err := disk.OpenFile(path, false)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	format, err := disk.DetectFormat(f)
	var unsupported *disk.UnsupportedFormatError
	if errors.As(err, &unsupported) {
		unsupported.Path = path
		return "", 0, err
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", path, err)
	}
	var hdr [512]byte
	n, _ := f.ReadAt(hdr[:], 0)
	if format == disk.FormatQcow2 {
		if n < 72 {
			return "", 0, fmt.Errorf("%s: %w: truncated qcow2 header", path, disk.ErrNotDiskImage)
		}
		// Glance refuses a qcow2 with a backing file (it could read the host's files).
		if binary.BigEndian.Uint64(hdr[8:16]) != 0 {
			return "", 0, fmt.Errorf("%s: %w: the qcow2 has a backing file; flatten it with qemu-img convert -O qcow2", path, disk.ErrNotDiskImage)
		}
		return format, st.Size(), nil
	}
	if st.Size() == 0 || st.Size()%512 != 0 {
		return "", 0, fmt.Errorf("%s: %w: its size (%d bytes) is not a whole number of 512-byte sectors", path, disk.ErrNotDiskImage, st.Size())
	}
	return format, st.Size(), nil
}

// rawAsQcow2 streams a raw image as qcow2 on the fly (convert.Qcow2Reader): Glance gets a smaller
// qcow2 with the holes of the raw file left out. It returns the opener and the qcow2's length.
func rawAsQcow2(path string) (Opener, int64, error) {
	_, size, f, err := convert.Qcow2Reader(path)
	if err != nil {
		return nil, 0, err
	}
	f.Close()
	return func() (io.ReaderAt, io.Closer, error) {
		s, n, f, err := convert.Qcow2Reader(path)
		if err != nil {
			return nil, nil, err
		}
		if n != size {
			f.Close()
			return nil, nil, fmt.Errorf("%s changed while it was being uploaded", path)
		}
		return s, f, nil
	}, size, nil
}

// VirtualSize is the size of the disk an image file holds: a qcow2's virtual size, a raw file's size.
func VirtualSize(path string) (int64, error) {
	format, size, err := DetectFileFormat(path)
	if err != nil || format != disk.FormatQcow2 {
		return size, err
	}
	return qcow2VirtualSize(path)
}

// qcow2VirtualSize reads the virtual size from a qcow2's header.
func qcow2VirtualSize(path string) (int64, error) {
	r, f, err := convert.RawReader(path)
	if err != nil {
		return 0, err
	}
	f.Close()
	return r.Size(), nil
}

// Qcow2AsRaw opens the virtual disk of a qcow2 image: the bytes of the raw image it holds.
func Qcow2AsRaw(path string) Opener {
	return func() (io.ReaderAt, io.Closer, error) {
		r, f, err := convert.RawReader(path)
		return r, f, err
	}
}

// warnHybridMBR says, before the upload, what a hybrid MBR means for the cloud and how to fix it:
// Glance 2026.2 refuses the image, an older Glance takes it and Nova's inspection refuses it later.
func warnHybridMBR(path string, log io.Writer) {
	img, err := disk.Open(path, false)
	if err != nil || log == nil {
		return // SetFile opened it; an error here is not the upload's
	}
	defer img.Close()
	if mbr, err := disk.ReadMBR(img.Disk); err == nil && mbr.Kind == disk.MBRHybrid {
		fmt.Fprintf(log, "warning: %s\n", disk.HybridMBRAdvice(path))
	}
}
