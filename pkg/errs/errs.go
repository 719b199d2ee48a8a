// Package errs holds the one error kind every package shares: the caller's input is wrong (a
// bad flag value, argument or configuration). The CLI maps it to exit code 2 with one
// errors.Is(err, ErrInvalid); everything else is a failure (exit 1).
package errs

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about the caller's input rather than the work.
var ErrInvalid = errors.New("invalid input")

// Invalidf is fmt.Errorf (with %w) for an error wrapping ErrInvalid; the message is only the
// formatted text, so wrapping adds no prefix to what the user reads.
func Invalidf(format string, a ...any) error { return Invalid(fmt.Errorf(format, a...)) }

// Invalid marks err as the caller's fault, keeping its message and its chain; nil stays nil.
func Invalid(err error) error {
	if err == nil || errors.Is(err, ErrInvalid) {
		return err
	}
	return &invalid{err}
}

type invalid struct{ err error }

func (e *invalid) Error() string   { return e.err.Error() }
func (e *invalid) Unwrap() []error { return []error{e.err, ErrInvalid} }
