package glance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// OnExists says what to do when an image with the requested name already exists.
type OnExists string

const (
	Reuse   OnExists = "reuse"   // keep an identical active image, refuse a different one
	Replace OnExists = "replace" // upload anew, then delete every older image of that name
	fail    OnExists = "fail"    // refuse when the name exists at all
)

// ParseOnExists validates an --on-exists value.
func ParseOnExists(s string) (OnExists, error) {
	switch o := OnExists(s); o {
	case Reuse, Replace, fail:
		return o, nil
	}
	return "", errs.Invalidf("invalid --on-exists: must be reuse, replace or fail, not %q", s)
}

// Request is one image to upload; the same Request may go to several clouds at once.
type Request struct {
	File string
	// Open opens the bytes to send when they are not the file as it is (a raw file streamed as
	// qcow2); Format and Size then describe those bytes.
	Open   Opener
	Format disk.Format
	Size   int64
	// VirtualSize is the size of the disk the guest sees (min_disk is made from it).
	VirtualSize int64
	Name        string
	Metadata    Metadata
	Visibility  string // empty: Glance's default
	OnExists    OnExists
	// Signing, when set, signs the image for Glance's signature verification (--sign-key).
	Signing *Signing
	Wait    time.Duration // how long to wait for the image to become active
	// Log receives one-line notes (leftovers removed, retries, warnings).
	Log      io.Writer
	Progress progress.Func // of each transfer: upload, hash
	// Attempts and Backoff bound the retries of transient failures (defaults 3 and 2 s).
	Attempts int
	Backoff  time.Duration

	localHashes hashCache
}

// wait is how long to wait for the image to become active: Wait, 30 minutes when unset.
func (r *Request) wait() time.Duration {
	if r.Wait <= 0 {
		return 30 * time.Minute
	}
	return r.Wait
}

func (r *Request) log() io.Writer { return cmp.Or(r.Log, io.Discard) }

func (r *Request) opener() Opener {
	if r.Open != nil {
		return r.Open
	}
	return fileOpener(r.File)
}

// Result is what one cloud ended up with.
type Result struct {
	Cloud      string            `json:"cloud"`
	Region     string            `json:"region,omitempty"`
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Action     string            `json:"action"` // uploaded, reused or replaced
	Checksum   string            `json:"checksum"`
	HashAlgo   string            `json:"hashAlgo"`
	Size       int64             `json:"size"`
	DiskFormat string            `json:"diskFormat"`
	MinDisk    int               `json:"minDiskGiB"`
	MinRAM     int               `json:"minRamMiB"`
	Status     string            `json:"status"`
	Properties map[string]string `json:"properties"`
	Tags       []string          `json:"tags"`
	// RemovedLeftovers are half-made images of earlier failed runs deleted before uploading.
	RemovedLeftovers []string `json:"removedLeftovers,omitempty"`
	// Replaced are the older images of the same name deleted by --on-exists replace.
	Replaced []string `json:"replaced,omitempty"`
}

// Upload makes sure cloud c has exactly the image described by req and returns it.
//
// A reused image that another run deletes meanwhile (its --on-exists replace) is noticed, and
// the decision is taken again from a fresh listing (the replacement is then reused or
// refused), so no run reports an image ID that no longer exists.
func Upload(ctx context.Context, c *Cloud, req *Request) (*Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := decideAndUpload(ctx, c, req)
		if err == nil {
			err = stillThere(ctx, c, req, res)
		}
		var gone *goneError
		if errors.As(err, &gone) && attempt < 3 {
			fmt.Fprintf(req.log(), "%s: the image %s was deleted while this run reused it (another run replaced it); looking again\n", c.Label(), gone.id)
			continue
		}
		return res, err
	}
}

// stillThere lists the name once more before res is reported: another run (a concurrent
// replace) may have deleted the image meanwhile, and a run must not report an ID that no longer
// exists.
func stillThere(ctx context.Context, c *Cloud, req *Request, res *Result) error {
	same, err := listByName(ctx, c, req.Name)
	if err != nil {
		return err
	}
	for _, img := range same {
		if img.ID == res.ID && img.Status == images.ImageStatusActive {
			return nil
		}
	}
	return &goneError{id: res.ID, name: req.Name}
}

// goneError is an image that disappeared or stopped being active while it was being reused.
type goneError struct{ id, name string }

func (e *goneError) Error() string {
	return fmt.Sprintf("the image %s named %q was deleted or deactivated while this run reused it, again and again (other runs replacing it); run again when they are done", e.id, e.name)
}

func decideAndUpload(ctx context.Context, c *Cloud, req *Request) (*Result, error) {
	logf := func(format string, a ...any) {
		fmt.Fprintf(req.log(), "%s: "+format+"\n", append([]any{c.Label()}, a...)...)
	}
	// The signature first: a certificate that Barbican lacks or that does not match the key, or a
	// Barbican that is down, stops the upload before Glance has anything.
	if req.Signing != nil {
		if _, err := req.Signing.properties(ctx, c, req); err != nil {
			return nil, err
		}
	}
	// Another run's upload of this name in flight is waited for, not taken for a leftover.
	same, flown, err := waitForOthers(ctx, c, req, logf)
	if err != nil {
		return nil, err
	}
	res := &Result{Cloud: c.Name, Region: c.Region, Name: req.Name}
	warnForeignNamesakes(ctx, c, req.Name, logf)

	// Leftovers of an earlier failed run of this tool go first, so they never count as "existing".
	var existing []images.Image
	for _, img := range same {
		if isLeftover(img) {
			if err := DeleteImage(ctx, c, img.ID); err != nil {
				return nil, fmt.Errorf("removing leftover image %s (status %s) of an earlier failed upload: %w", img.ID, img.Status, err)
			}
			logf("removed leftover image %s (status %s) left by an earlier failed upload", img.ID, img.Status)
			res.RemovedLeftovers = append(res.RemovedLeftovers, img.ID)
			continue
		}
		existing = append(existing, img)
	}
	if len(existing) > 1 {
		logf("warning: %d images are named %q (%s); CAPO needs exactly one", len(existing), req.Name, ids(existing))
	}

	switch req.OnExists {
	case fail:
		if len(existing) > 0 {
			return nil, fmt.Errorf("an image named %q already exists (%s); use --on-exists reuse or replace, or choose another --name", req.Name, ids(existing))
		}
	case Reuse:
		if len(existing) > 1 {
			return nil, fmt.Errorf("%d images are named %q (%s) and CAPO needs exactly one: run again with --on-exists replace to keep only the new upload, or choose another --name", len(existing), req.Name, ids(existing))
		}
		if len(existing) == 1 {
			return reuse(ctx, c, req, res, existing[0])
		}
	}

	// What --on-exists replace deletes are the images that were there before this run; an upload
	// it saw in flight is a concurrent run's, which the runs settle by the one rule instead.
	existing = slices.DeleteFunc(existing, func(img images.Image) bool { return flown[img.ID] })
	img, err := createAndUpload(ctx, c, req, logf)
	if err != nil {
		return nil, err
	}
	// Another run may have uploaded the name at the same moment: the runs agree on one image.
	img, action, err := settle(ctx, c, req, img, existing, logf)
	if err != nil {
		return nil, err
	}
	fillResult(res, img)
	res.Action = "uploaded"
	if action != "" {
		res.Action = action
		return res, nil
	}
	if req.OnExists == Replace && len(existing) > 0 {
		res.Action = "replaced"
		var failed []string
		for _, old := range existing {
			if err := DeleteImage(ctx, c, old.ID); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", old.ID, err))
				continue
			}
			res.Replaced = append(res.Replaced, old.ID)
			logf("deleted the older image %s of the same name", old.ID)
		}
		if len(failed) > 0 && ctx.Err() != nil {
			return res, interrupt.Left(ctx.Err(), fmt.Sprintf("%s: the new image %s (active, verified) and the older image(s) of the same name it was replacing; CAPO needs exactly one: run again with --on-exists replace", c.Label(), img.ID))
		}
		if len(failed) > 0 {
			return res, fmt.Errorf("uploaded %s, but could not delete the older images of the same name (CAPO needs exactly one): %s", img.ID, strings.Join(failed, "; "))
		}
	}
	return res, nil
}

// reuse accepts an existing active image whose content is the file's, by Glance's own hash.
func reuse(ctx context.Context, c *Cloud, req *Request, res *Result, img images.Image) (*Result, error) {
	if img.Status != images.ImageStatusActive {
		return nil, fmt.Errorf("an image named %q already exists (%s) in status %s, not active; use --on-exists replace or choose another --name", req.Name, img.ID, img.Status)
	}
	algo, remote := imageHash(img)
	if remote == "" {
		return nil, fmt.Errorf("the existing image %s named %q has no os_hash_value to compare with; use --on-exists replace or choose another --name", img.ID, req.Name)
	}
	local, err := req.localHashes.get(ctx, req, algo, c.Label())
	if err != nil {
		return nil, err
	}
	if local != remote || img.SizeBytes != req.Size {
		return nil, fmt.Errorf("an image named %q already exists (%s) with different content (%s %s..., the file's %s...); use --on-exists replace to upload anew and remove it, or choose another --name",
			req.Name, img.ID, algo, short(remote), short(local))
	}
	if err := req.Signing.sameCertificate(c, img); err != nil {
		return nil, fmt.Errorf("an image named %q already exists (%s) with the same content but %v; use --on-exists replace to upload it signed, or choose another --name", req.Name, img.ID, err)
	}
	// Hashing the file took a while: the image must still be there (a concurrent replace
	// deletes it) before this run names it as the result.
	now, err := images.Get(ctx, c.Image, img.ID).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) || (err == nil && now.Status != images.ImageStatusActive) {
		return nil, &goneError{id: img.ID, name: req.Name}
	}
	if err != nil {
		return nil, glanceError(c, "checking the existing image "+img.ID, err)
	}
	fillResult(res, now)
	res.Action = "reused"
	return res, nil
}

// createAndUpload creates the image, streams the file, waits for active and verifies the hash,
// retrying transient failures; whatever fails, it deletes the image it made.
func createAndUpload(ctx context.Context, c *Cloud, req *Request, logf func(string, ...any)) (*images.Image, error) {
	attempts, backoff := req.Attempts, req.Backoff
	if attempts <= 0 {
		attempts = 3
	}
	if backoff <= 0 {
		backoff = 2 * time.Second
	}
	var orphans []string // half-made images that could not be deleted when their attempt failed
	for attempt := 1; ; attempt++ {
		img, orphan, err := uploadOnce(ctx, c, req)
		if orphan != "" {
			orphans = append(orphans, orphan)
		}
		if err == nil {
			// Glance came back: the images an earlier attempt could not delete go now.
			for _, id := range orphans {
				if derr := DeleteImage(ctx, c, id); derr != nil {
					return img, fmt.Errorf("uploaded %s, but the half-made image %s of a failed attempt could not be deleted: %w", img.ID, id, derr)
				}
				logf("removed the half-made image %s of a failed attempt", id)
			}
			return img, nil
		}
		if ctx.Err() != nil {
			return nil, interruptedUpload(c, err, orphans)
		}
		if !isTransient(err) || attempt == attempts {
			if attempt > 1 {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			// The current attempt's own orphan is named in err already.
			earlier := slices.DeleteFunc(slices.Clone(orphans), func(id string) bool { return id == orphan })
			if len(earlier) > 0 {
				err = fmt.Errorf("%w; an earlier attempt left the half-made image(s) %s, which could not be deleted: the next run of upload with this name removes them",
					err, strings.Join(earlier, ", "))
			}
			return nil, err
		}
		logf("attempt %d of %d failed: %v; retrying in %s", attempt, attempts, err, backoff)
		select {
		case <-ctx.Done():
			return nil, interruptedUpload(c, ctx.Err(), orphans)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// interruptedUpload says what a cancelled upload left in Glance: the half-made images it could
// not delete (the next run with this name removes them), or nothing.
func interruptedUpload(c *Cloud, err error, orphans []string) error {
	if len(orphans) == 0 {
		return interrupt.Nothing(err, c.Label()+": no image was left (the half-made one, if any, was deleted)")
	}
	return interrupt.Left(err, fmt.Sprintf("%s: the half-made image(s) %s, which could not be deleted; the next upload with this name removes them",
		c.Label(), strings.Join(orphans, ", ")))
}

// uploadOnce makes one complete attempt; orphan is the ID of an image it made but could not delete.
func uploadOnce(ctx context.Context, c *Cloud, req *Request) (img *images.Image, orphan string, err error) {
	holdOwner() // from before the image exists until it is active or deleted
	defer func() { releaseOwner(err != nil) }()
	props := map[string]string{PropertyUploadOwner: selfOwner}
	maps.Copy(props, req.Metadata.Properties)
	maps.Copy(props, req.Signing.cached(c))
	opts := images.CreateOpts{
		Name:            req.Name,
		ContainerFormat: "bare",
		DiskFormat:      string(req.Format),
		Tags:            req.Metadata.Tags,
		Properties:      props,
		MinDisk:         req.Metadata.MinDiskGiB,
		MinRAM:          req.Metadata.MinRAMMiB,
	}
	if req.Visibility != "" {
		v := images.ImageVisibility(req.Visibility)
		opts.Visibility = &v
	}
	// The create request is never cut off by Ctrl-C: Glance may have made the record before the
	// answer arrives, and only with its ID can the half-made image be deleted (fillImage then
	// sees the cancellation at once).
	createCtx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := images.Create(createCtx, c.Image, opts).Extract()
	cancelCreate()
	if err != nil {
		return nil, "", glanceError(c, "creating the image record", err)
	}
	done, err := fillImage(ctx, c, req, created.ID)
	if err == nil {
		return done, "", nil
	}
	// Never leave a half-made image: delete it even when the caller gave up (context cancelled).
	if derr := deleteUncancelled(ctx, c, created.ID); derr != nil {
		return nil, created.ID, fmt.Errorf("%w; the half-made image %s could not be deleted (%v): the next run of upload with this name removes it", err, created.ID, derr)
	}
	return nil, "", fmt.Errorf("%w (the half-made image %s was deleted)", err, created.ID)
}

// fillImage sends the data of image id, waits until it is active and compares the hashes.
func fillImage(ctx context.Context, c *Cloud, req *Request, id string) (*images.Image, error) {
	rep := req.Progress.Start("upload to "+c.Label(), req.Size)
	sum, err := putData(ctx, c, id, req.opener(), req.Size, rep)
	rep.Finish()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isNetworkError(err) {
			return nil, fmt.Errorf("Glance at %s stopped answering during the upload: %w", c.Image.Endpoint, err)
		}
		return nil, glanceError(c, "uploading the image data", err)
	}
	req.localHashes.sums.Store("sha512", sum)
	img, err := waitActive(ctx, c, id, req.wait())
	if err != nil {
		return nil, err
	}
	algo, remote := imageHash(*img)
	if remote == "" {
		return nil, fmt.Errorf("Glance did not report os_hash_value for image %s, so the upload cannot be verified", id)
	}
	local := sum
	if algo != "sha512" {
		if local, err = req.localHashes.get(ctx, req, algo, c.Label()); err != nil {
			return nil, err
		}
	}
	if local != remote {
		return nil, fmt.Errorf("hash mismatch after upload: Glance has %s %s..., the file has %s...; the data was damaged on the way", algo, short(remote), short(local))
	}
	return img, nil
}

// waitActive polls the image until it is active, killed or the wait is over.
func waitActive(ctx context.Context, c *Cloud, id string, wait time.Duration) (*images.Image, error) {
	deadline := time.Now().Add(wait)
	delay := 100 * time.Millisecond
	for {
		img, err := images.Get(ctx, c.Image, id).Extract()
		if err != nil {
			return nil, glanceError(c, "checking the image status", err)
		}
		switch img.Status {
		case images.ImageStatusActive:
			return img, nil
		case images.ImageStatusKilled, images.ImageStatusDeleted, images.ImageStatusPendingDelete:
			return nil, fmt.Errorf("Glance marked image %s as %s after the upload (see the Glance API log; a disk_format that does not match the data is a common cause)", id, img.Status)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("image %s is still %s after %s (--wait)", id, img.Status, wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if delay < 2*time.Second {
			delay *= 2
		}
	}
}

// listByName lists the token's project's images named name, oldest first: asked for by owner and
// checked again on the answer, as prune does. An admin token lists every project's images, and
// another project's image is never reused, replaced, waited for or removed as a leftover.
func listByName(ctx context.Context, c *Cloud, name string) ([]images.Image, error) {
	all, err := list(ctx, c, images.ListOpts{Name: name, Owner: c.ProjectID}, fmt.Sprintf("listing the images named %q", name))
	if err != nil {
		return nil, err
	}
	if c.ProjectID != "" {
		all = slices.DeleteFunc(all, func(img images.Image) bool { return img.Owner != c.ProjectID })
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreatedAt.Before(all[j].CreatedAt) })
	return all, nil
}

// warnForeignNamesakes says when images of other projects that this project can see (public,
// community, shared, or all with an admin token) have the name: they are left alone, but CAPO,
// which finds an image by name among all it can see, would find more than one.
func warnForeignNamesakes(ctx context.Context, c *Cloud, name string, logf func(string, ...any)) {
	if c.ProjectID == "" {
		return
	}
	all, err := list(ctx, c, images.ListOpts{Name: name}, fmt.Sprintf("listing the images named %q", name))
	if err != nil {
		return // only a warning; listByName's own errors stop the upload
	}
	var foreign []string
	for _, img := range all {
		if img.Owner != c.ProjectID {
			foreign = append(foreign, fmt.Sprintf("%s (project %s, %s)", img.ID, img.Owner, img.Visibility))
		}
	}
	if len(foreign) > 0 {
		logf("warning: other projects' images are named %q too: %s; they are left alone, but CAPO finding the image by name would see more than one: choose another --name, or give the manifests the image's ID (--image-id)",
			name, strings.Join(foreign, ", "))
	}
}

// list lists the images matching opts, each once (a Glance whose pages overlap repeats
// some); what names the request in its errors. A next link that was followed already ends the
// listing with an error: followed again, it would never end.
func list(ctx context.Context, c *Cloud, opts images.ListOpts, what string) ([]images.Image, error) {
	var all []images.Image
	seen, followed := map[string]bool{}, map[string]bool{}
	err := images.List(c.Image, opts).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		some, err := images.ExtractImages(p)
		if err != nil {
			return false, err
		}
		for _, img := range some {
			if !seen[img.ID] {
				seen[img.ID] = true
				all = append(all, img)
			}
		}
		next, err := p.(images.ImagePage).NextPageURL()
		if err != nil {
			return false, err
		}
		if next != "" && followed[next] {
			return false, fmt.Errorf("Glance answered with a next page it had already given (%s): the listing would never end, so it is not trusted; report it to the cloud operator", redact.URL(next))
		}
		followed[next] = true
		return true, nil
	})
	if err != nil {
		return nil, glanceError(c, what, err)
	}
	return all, nil
}

// DeleteImage deletes an image; one already gone is not an error.
func DeleteImage(ctx context.Context, c *Cloud, id string) error {
	err := images.Delete(ctx, c.Image, id).ExtractErr()
	if err == nil || gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	return glanceError(c, "deleting image "+id, err)
}

// deleteUncancelled deletes an image this run made even when ctx is cancelled: a half-made or
// duplicate image must not stay behind.
func deleteUncancelled(ctx context.Context, c *Cloud, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return DeleteImage(ctx, c, id)
}

// isLeftover is a half-made image of this tool: tagged or owned by it and never finished.
func isLeftover(img images.Image) bool {
	switch img.Status {
	case images.ImageStatusQueued, images.ImageStatusSaving, images.ImageStatusKilled:
	default:
		return false
	}
	_, owned := img.Properties[PropertyUploadOwner]
	return owned || slices.Contains(img.Tags, ToolTag)
}

func imageHash(img images.Image) (algo, value string) {
	algo, _ = img.Properties["os_hash_algo"].(string)
	value, _ = img.Properties["os_hash_value"].(string)
	algo = cmp.Or(algo, "sha512")
	return algo, value
}

func fillResult(res *Result, img *images.Image) {
	res.ID = img.ID
	res.Status = string(img.Status)
	res.Size = img.SizeBytes
	res.DiskFormat = img.DiskFormat
	res.MinDisk, res.MinRAM = img.MinDiskGigabytes, img.MinRAMMegabytes
	res.HashAlgo, res.Checksum = imageHash(*img)
	res.Tags = append([]string{}, img.Tags...)
	sort.Strings(res.Tags)
	res.Properties = map[string]string{}
	for k, v := range img.Properties {
		if s, ok := v.(string); ok && !strings.HasPrefix(k, "os_hash") && k != "stores" && k != "owner_specified.openstack.object" {
			res.Properties[k] = s
		}
	}
}

// glanceError says which step failed against which endpoint, in words rather than gophercloud's.
func glanceError(c *Cloud, what string, err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ue):
		body := redact.Excerpt(ue.Body, 300)
		return &glanceHTTPError{msg: fmt.Sprintf("%s: Glance at %s answered HTTP %d: %s", what, redact.URL(c.Image.Endpoint), ue.Actual, body), status: ue.Actual}
	case isNetworkError(err):
		return fmt.Errorf("%s: Glance at %s is unreachable: %w", what, redact.URL(c.Image.Endpoint), err)
	}
	return fmt.Errorf("%s at %s: %w", what, redact.URL(c.Image.Endpoint), err)
}

type glanceHTTPError struct {
	msg    string
	status int
}

func (e *glanceHTTPError) Error() string { return e.msg }

func ids(imgs []images.Image) string {
	s := make([]string, len(imgs))
	for i, img := range imgs {
		s[i] = img.ID
	}
	return strings.Join(s, ", ")
}

func short(h string) string { return h[:min(len(h), 16)] }

// hashCache computes the file's hash once per algorithm, however many clouds ask.
// KnownHash hands over a hash of the file the caller already has (build's record step hashed
// the artifact), so the reuse check compares it with Glance's without reading the file again.
// It is ignored when the bytes sent are not the file as it is (a raw file streamed as qcow2).
func (r *Request) KnownHash(algo, sum string) {
	if r.Open == nil && sum != "" {
		r.localHashes.sums.Store(algo, sum)
	}
}

type hashCache struct {
	sums   sync.Map // algo -> hex sum
	hashMu sync.Mutex
}

func (h *hashCache) get(ctx context.Context, req *Request, algo, label string) (string, error) {
	h.hashMu.Lock() // one hashing pass at a time; the others wait for its result
	defer h.hashMu.Unlock()
	if s, ok := h.sums.Load(algo); ok {
		return s.(string), nil
	}
	rep := req.Progress.Start("hash "+label, req.Size)
	sum, err := hashData(ctx, req.opener(), req.Size, algo, rep)
	rep.Finish()
	if err != nil {
		return "", err
	}
	h.sums.Store(algo, sum)
	return sum, nil
}
