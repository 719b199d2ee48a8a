// Package interrupt says what an operation stopped by Ctrl-C (a cancelled context) left behind,
// so the CLI can report the truth per command instead of one generic claim: "the half-made Glance
// image X could not be deleted", "the 12 MiB received are kept in ... to resume", or that nothing
// was left (and what is guaranteed untouched).
package interrupt

import (
	"context"
	"errors"
	"strings"
)

// Error is an operation stopped by cancellation.
type Error struct {
	Err error // the cancellation as the operation saw it (wraps context.Canceled)
	// Leftovers are what remains, one sentence each; empty means nothing was left behind.
	Leftovers []string
	// Clean, when nothing was left, says what the user can rely on ("flatcar.raw was not changed").
	Clean string
}

func (e *Error) Error() string {
	if len(e.Leftovers) == 0 {
		return e.Err.Error()
	}
	return e.Err.Error() + "; left behind: " + strings.Join(e.Leftovers, "; ")
}

func (e *Error) Unwrap() error { return e.Err }

// Left wraps err, a cancellation, with what remains. Without leftovers it reports that nothing
// was left. An err that is no cancellation is returned as it is.
func Left(err error, leftovers ...string) error {
	if !IsCancel(err) {
		return err
	}
	return &Error{Err: err, Leftovers: leftovers}
}

// Nothing wraps err, a cancellation, saying nothing was left and what is guaranteed (clean).
func Nothing(err error, clean string) error {
	if !IsCancel(err) {
		return err
	}
	return &Error{Err: err, Clean: clean}
}

// IsCancel tells whether err comes from a cancelled context.
func IsCancel(err error) bool {
	return err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// Report gathers what every *Error in err's tree (several clouds joined, wrapped errors) says.
// typed is false when err carries no *Error, so the caller falls back to the command's default.
func Report(err error) (leftovers, clean []string, typed bool) {
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ie, ok := e.(*Error); ok {
			typed = true
			leftovers = append(leftovers, ie.Leftovers...)
			if ie.Clean != "" && len(ie.Leftovers) == 0 {
				clean = append(clean, ie.Clean)
			}
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return leftovers, clean, typed
}
