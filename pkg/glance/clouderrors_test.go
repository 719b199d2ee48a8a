package glance_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// An upload to several clouds is a usage error (exit 2) only when every cloud failed on its
// configuration; one cloud failing on the work makes the whole a failure (exit 1).
func TestCloudErrorsInvalidOnlyWhenAllAre(t *testing.T) {
	cfg := fmt.Errorf("cloud a: %w", errs.Invalidf("cloud %q is not defined", "a"))
	work := errors.New("cloud b: hash mismatch")
	if !errors.Is(glance.CloudErrors{cfg, cfg}, errs.ErrInvalid) {
		t.Fatal("all configuration errors: not invalid")
	}
	mixed := glance.CloudErrors{cfg, work}
	if errors.Is(mixed, errs.ErrInvalid) {
		t.Fatal("one work failure: still invalid")
	}
	if mixed.Error() != cfg.Error()+"\n"+work.Error() {
		t.Fatalf("message %q", mixed.Error())
	}
	if errors.Is(glance.CloudErrors{}, errs.ErrInvalid) {
		t.Fatal("no errors: invalid")
	}
}
