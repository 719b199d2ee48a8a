package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// codedError carries the exit code a failure should produce.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// Usagef reports a usage error or an invalid flag value: exit code 2.
func Usagef(format string, a ...any) error {
	return &codedError{code: ExitUsage, err: fmt.Errorf(format, a...)}
}

// AsUsage marks an existing error (for example a validation error from a package) as exit code 2.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: ExitUsage, err: err}
}

// WithExitCode makes err exit with code; for reports such as inspect's NOT READY verdict.
func WithExitCode(code int, err error) error {
	return &codedError{code: code, err: err}
}

// cobra's own argument and command errors carry no type; recognise them by their text.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag",
		"accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// ExactArgs is cobra.ExactArgs with a message that names the missing arguments and exit code 2.
func ExactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			what := strings.Join(names, " ")
			return Usagef("%s needs %d argument(s) (%s), got %d; see '%s --help'",
				cmd.CommandPath(), n, what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// MinimumArgs is cobra.MinimumNArgs with exit code 2.
func MinimumArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return Usagef("%s needs at least %d argument(s) (%s); see '%s --help'",
				cmd.CommandPath(), n, strings.Join(names, " "), cmd.CommandPath())
		}
		return nil
	}
}
