package imagebuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// The sysext method edits a copy-on-write overlay over the base instead of a raw work copy:
// from a base as Flatcar publishes it (compressed qcow2, compat 0.10) it must write exactly the
// artifact the raw work copy gave, plain and --compress; and a cancelled build leaves no
// artifact, no build directory and no open overlay file.
func TestSysextOverlayMatchesRawWorkCopy(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat", "qemu-img")
	raw := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	base := filepath.Join(t.TempDir(), "flatcar_production_qemu_image.img")
	testutil.QemuImg(t, "convert", "-c", "-O", "qcow2", "-o", "compat=0.10", raw, base)
	first := testOptions(t, base)
	build := func(t *testing.T, viaOverlay, compress bool) []byte {
		t.Helper()
		overlayMethods[MethodSysext] = viaOverlay
		defer func() { overlayMethods[MethodSysext] = true }()
		o := testOptions(t, base)
		o.Method, o.Images.NoPreload, o.Compress = MethodSysext, true, compress
		o.Kubernetes, o.CacheDir = first.Kubernetes, first.CacheDir // one mirror, one cache
		// The Kubernetes downloads report from their goroutines.
		var log lockedBuffer
		o.Log = &log
		rec, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("build (overlay %v): %v\n%s", viaOverlay, err, log.String())
		}
		if viaOverlay == strings.Contains(log.String(), "work.raw") {
			t.Fatalf("overlay %v, but the work copy step said:\n%s", viaOverlay, log.String())
		}
		b, err := os.ReadFile(filepath.Join(o.OutputDir, rec.Artifacts[0].File))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, compress := range []bool{false, true} {
		old, now := build(t, false, compress), build(t, true, compress)
		if !bytes.Equal(old, now) {
			t.Errorf("compress %v: the overlay build wrote %d bytes that differ from the raw work copy's %d", compress, len(now), len(old))
		}
	}
	if leaked := overlayFiles(t); len(leaked) != 0 {
		t.Errorf("overlay files still open after the builds: %v", leaked)
	}

	t.Run("cancelled before the qcow2 step", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := testOptions(t, base)
		o.Method, o.Images.NoPreload = MethodSysext, true
		o.Kubernetes, o.CacheDir = first.Kubernetes, first.CacheDir
		o.Log = cancelOn{"] inspect", cancel} // Ctrl-C as the artifact is about to be written
		if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want cancelled", err)
		}
		if entries, err := os.ReadDir(o.OutputDir); err == nil {
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".lock") {
					t.Errorf("output dir left with %s", e.Name())
				}
			}
		}
		if leaked := overlayFiles(t); len(leaked) != 0 {
			t.Errorf("overlay files still open: %v", leaked)
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cancelOn cancels when a progress line contains s.
type cancelOn struct {
	s      string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.s)) {
		c.cancel()
	}
	return len(p), nil
}

// overlayFiles are this process's open descriptors of overlay files (unlinked at creation, so
// only /proc shows them).
func overlayFiles(t *testing.T) []string {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.Contains(target, ".overlay-") {
			open = append(open, target)
		}
	}
	return open
}
