package standin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// Image is Build for tests: it returns the cached read-only raw disk (copy it before booting it
// writable), building it on first use, and fails the test when that is impossible.
func Image(t testing.TB, opts Options) string {
	t.Helper()
	testutil.RequireTools(t, Tools...)
	start := time.Now()
	if opts.Log == nil {
		opts.Log = t.Logf
	}
	path, err := Build(context.Background(), opts)
	if errors.Is(err, ErrNeedsRoot) {
		testutil.RequireRoot(t, err.Error())
	}
	if err != nil {
		t.Fatalf("standin: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("standin: guest image ready in %s: %s", d.Round(time.Millisecond), path)
	}
	return path
}
