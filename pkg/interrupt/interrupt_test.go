package interrupt_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
)

// What several clouds (joined errors, each wrapped) left is gathered; a cloud that left nothing
// contributes its clean note only when nothing was left anywhere; other errors stay as they are.
func TestReportGathersEveryCloud(t *testing.T) {
	cancel := fmt.Errorf("uploading: %w", context.Canceled)
	left := interrupt.Left(cancel, "east: image 1 could not be deleted")
	clean := interrupt.Nothing(cancel, "west: no image was left")
	joined := errors.Join(fmt.Errorf("east: %w", left), fmt.Errorf("west: %w", clean))
	leftovers, notes, typed := interrupt.Report(joined)
	if !typed || !slices.Equal(leftovers, []string{"east: image 1 could not be deleted"}) || !slices.Equal(notes, []string{"west: no image was left"}) {
		t.Fatalf("got %q %q %v", leftovers, notes, typed)
	}
	if !errors.Is(joined, context.Canceled) {
		t.Fatal("the cancellation is no longer visible through the wrapping")
	}
	if _, _, typed := interrupt.Report(cancel); typed {
		t.Fatal("an untyped cancellation reported as typed")
	}
	plain := errors.New("disk full")
	if interrupt.Left(plain, "x") != plain || interrupt.Nothing(plain, "x") != plain {
		t.Fatal("a failure that is no cancellation was wrapped as one")
	}
	if interrupt.Left(nil) != nil {
		t.Fatal("nil became an error")
	}
}
