package glance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// Two pipelines may upload the same name at the same moment; CAPO needs exactly one image of
// that name. Every upload marks its image with its owner (a random token of the run), so another
// run can tell an upload in flight from the leftover of a dead one, and once an upload is active
// the runs agree on one winner by one rule, whatever each run's --on-exists: the earliest created
// (then the lowest ID). A loser removes its own image and reuses the winner (same content) or
// fails naming both (different content). An upload that was in flight when a run looked is that
// run's rival, never an older image its --on-exists replace deletes.

// PropertyUploadOwner holds a random token of the run uploading the image: no host name or pid,
// since a public image's properties are everyone's to read. While the run uploads it holds an
// flock on a file named by the token in the temp directory, so another run on this machine tells
// its upload in flight from a dead run's leftover; a run elsewhere cannot be told and is waited
// for (up to --wait).
const PropertyUploadOwner = "flatcar_capo_upload_owner"

var selfOwner = func() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

func ownerPath(token string) string {
	return filepath.Join(os.TempDir(), "flatcar-capo-upload-"+token+".lock")
}

var ownerTokenRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// liveMark is this process's flock on its owner file, held while any of its uploads is under
// way. When the last one ends the lock goes, and the file too unless an upload failed: a failed
// upload may have left a half-made image, and only the file, unlocked, tells the next run on this
// machine that its maker is dead (without it, it is another machine's, waited for up to --wait).
var liveMark struct {
	mu     sync.Mutex
	n      int
	f      *os.File
	failed bool
}

func holdOwner() {
	liveMark.mu.Lock()
	defer liveMark.mu.Unlock()
	if liveMark.n++; liveMark.n > 1 {
		return
	}
	f, err := os.OpenFile(ownerPath(selfOwner), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return // others cannot tell: they wait for this upload up to --wait
	}
	if ok, _ := filelock.TryLock(f, filelock.Exclusive); !ok {
		f.Close()
		return
	}
	liveMark.f = f
}

func releaseOwner(failed bool) {
	liveMark.mu.Lock()
	defer liveMark.mu.Unlock()
	liveMark.failed = liveMark.failed || failed
	if liveMark.n--; liveMark.n > 0 || liveMark.f == nil {
		return
	}
	if !liveMark.failed {
		os.Remove(ownerPath(selfOwner))
	}
	liveMark.f.Close()
	liveMark.f = nil
}

// ownerState says whether the run that made img is this one, is alive on this host, is dead
// on this host, or cannot be told (another host, or an image from before owners were recorded).
type ownerState int

const (
	ownerUnknown ownerState = iota
	ownerSelf
	ownerAlive
	ownerDead
	ownerNone // no owner property: made by an older flatcar-capo
)

func owner(img images.Image) ownerState {
	v, _ := img.Properties[PropertyUploadOwner].(string)
	switch {
	case v == "":
		return ownerNone
	case v == selfOwner:
		return ownerSelf
	case !ownerTokenRe.MatchString(v):
		return ownerUnknown // an older flatcar-capo's "host pid start"
	}
	f, err := os.Open(ownerPath(v))
	if err != nil {
		return ownerUnknown // a run on another machine
	}
	defer f.Close()
	free, err := filelock.TryLock(f, filelock.Shared)
	switch {
	case err != nil:
		return ownerUnknown
	case !free:
		return ownerAlive
	}
	return ownerDead
}

// inFlight is a half-made image that a live run (or one that cannot be told dead) may still be
// uploading: it must be waited for, not deleted. Glance stores an image's row, then its
// properties, then its tags, so a list in between (two uploads started together) shows a queued
// image without tags, or without anything: such a bare one is taken to be in flight for a few
// seconds of waiting (since, Glance needs milliseconds; a bare image that stays bare is someone
// else's, not an upload of ours).
func inFlight(img images.Image, since time.Time) bool {
	switch img.Status {
	case images.ImageStatusQueued, images.ImageStatusSaving:
	default:
		return false
	}
	if _, owned := img.Properties[PropertyUploadOwner]; !owned {
		return img.Status == images.ImageStatusQueued && len(img.Tags) == 0 && time.Since(since) < bareWait
	}
	st := owner(img)
	return st == ownerAlive || st == ownerUnknown
}

// bareWait is how long a queued image without tags or owner counts as one Glance is still storing.
const bareWait = 3 * time.Second

// waitForOthers waits until none of the images named req.Name is in flight, then lists again.
// An upload that makes no progress within req.Wait is taken for dead. flown are the IDs of the
// uploads it saw in flight (other runs' concurrent uploads).
func waitForOthers(ctx context.Context, c *Cloud, req *Request, logf func(string, ...any)) (same []images.Image, flown map[string]bool, err error) {
	wait := req.wait()
	start := time.Now()
	deadline := start.Add(wait)
	said := false
	flown = map[string]bool{}
	for {
		same, err := listByName(ctx, c, req.Name)
		if err != nil {
			return nil, nil, err
		}
		var flying []images.Image
		for _, img := range same {
			if inFlight(img, start) {
				flying = append(flying, img)
				flown[img.ID] = true
			}
		}
		if len(flying) == 0 || time.Now().After(deadline) {
			if len(flying) > 0 {
				logf("the upload of %s under way since %s made no progress in %s: taken for a dead run's leftover", ids(flying), flying[0].CreatedAt.Format(time.RFC3339), wait)
				for i := range same {
					if inFlight(same[i], start) {
						delete(same[i].Properties, PropertyUploadOwner) // now an ordinary leftover
						delete(flown, same[i].ID)
					}
				}
			}
			// Only an upload of ours is a rival: a bare image (no owner mark) that stayed bare
			// past bareWait is someone else's half-made image, an ordinary leftover.
			for _, img := range same {
				if _, owned := img.Properties[PropertyUploadOwner]; !owned {
					delete(flown, img.ID)
				}
			}
			return same, flown, nil
		}
		if !said {
			logf("another run is uploading %q (%s); waiting for it (up to %s)", req.Name, ids(flying), wait)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// settle runs after this run's image mine is active and verified: if other images of the name
// appeared meanwhile, the runs agree on one and this run keeps or gives up its own. before are
// the images of the name this run found before it uploaded (the ones --on-exists replace
// deletes): never rivals, or a replace within Glance's one-second created_at could pick the image
// it replaces over its own.
func settle(ctx context.Context, c *Cloud, req *Request, mine *images.Image, before []images.Image, logf func(string, ...any)) (*images.Image, string, error) {
	start := time.Now()
	deadline := start.Add(req.wait())
	for {
		same, err := listByName(ctx, c, req.Name)
		if err != nil {
			return mine, "", err
		}
		var rivals []images.Image // images of other runs that may yet become the one
		for _, img := range same {
			if img.ID == mine.ID || slices.ContainsFunc(before, func(b images.Image) bool { return b.ID == img.ID }) || img.Status == images.ImageStatusKilled ||
				img.Status == images.ImageStatusDeleted || img.Status == images.ImageStatusPendingDelete {
				continue
			}
			if img.Status == images.ImageStatusActive || inFlight(img, start) {
				rivals = append(rivals, img)
			}
		}
		if len(rivals) == 0 {
			return mine, "", nil
		}
		all := append([]images.Image{*mine}, rivals...)
		sort.Slice(all, func(i, j int) bool { return winsOver(all[i], all[j]) })
		winner := all[0]
		if winner.ID == mine.ID {
			// The others give way to this one by the same rule; nothing to do here.
			return mine, "", nil
		}
		if winner.Status != images.ImageStatusActive {
			if time.Now().After(deadline) {
				return mine, "", fmt.Errorf("the concurrent upload %s of %q did not become active within %s; this run's image %s is kept: check Glance for two images of the name", winner.ID, req.Name, req.Wait, mine.ID)
			}
			select {
			case <-ctx.Done():
				return mine, "", ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		// This run lost: its image goes, whatever the content.
		if derr := deleteUncancelled(ctx, c, mine.ID); derr != nil {
			return mine, "", fmt.Errorf("another run uploaded %q at the same time (%s); this run's duplicate %s could not be deleted: %w", req.Name, winner.ID, mine.ID, derr)
		}
		_, theirs := imageHash(winner)
		_, ours := imageHash(*mine)
		if theirs == ours && winner.SizeBytes == mine.SizeBytes {
			logf("another run uploaded the same content as %s at the same time; removed this run's copy %s and reuse it", winner.ID, mine.ID)
			return &winner, "reused", nil
		}
		if req.OnExists == Replace {
			return nil, "", fmt.Errorf("another run replaced %q at the same time with image %s; this run's image %s was deleted so exactly one remains", req.Name, winner.ID, mine.ID)
		}
		return nil, "", fmt.Errorf("another run uploaded %q at the same time with different content: image %s (%s...) stays, this run's image %s (%s...) was deleted; choose another --name or use --on-exists replace",
			req.Name, winner.ID, short(theirs), mine.ID, short(ours))
	}
}

// winsOver orders the images of one name by the rule every run applies alike, whatever its
// --on-exists (a reuse run and a replace run that ordered them differently deleted each other's
// copies and left none): the earliest created, then the lowest ID.
func winsOver(a, b images.Image) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}
