package errs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestInvalidKeepsMessageAndChain(t *testing.T) {
	err := fmt.Errorf("--keyring: %w", Invalid(fmt.Errorf("reading k.asc: %w", context.Canceled)))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, context.Canceled) {
		t.Fatalf("chain lost: %v", err)
	}
	if err.Error() != "--keyring: reading k.asc: context canceled" {
		t.Fatalf("message %q", err)
	}
	if Invalid(nil) != nil || errors.Is(errors.New("x"), ErrInvalid) {
		t.Fatal("nil or a plain error is invalid")
	}
	if e := Invalidf("bad %d", 2); e.Error() != "bad 2" || !errors.Is(e, ErrInvalid) {
		t.Fatalf("Invalidf: %v", e)
	}
}
