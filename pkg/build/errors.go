package build

import "errors"

// usageError marks a bad option value (exit code 2 in the CLI).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// IsUsage reports whether err is about the options rather than the build.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
