package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// usagef reports a usage error or an invalid flag value: it wraps errs.ErrInvalid, exit code 2.
func usagef(format string, a ...any) error { return errs.Invalidf(format, a...) }

// exitCode is the one mapping of errors to exit codes: interrupted, the caller's input wrong
// (errs.ErrInvalid, wrapped by every package), or a failure.
func exitCode(ctx context.Context, err error) int {
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, errs.ErrInvalid):
		return exitUsage
	default:
		return exitFailure
	}
}

// argsAreUsage makes every command's argument check an errs.ErrInvalid error, cobra's own
// validators included (the completion commands' NoArgs), so no error is recognised by its text.
func argsAreUsage(c *cobra.Command) {
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return errs.Invalid(check(cmd, args)) }
	}
}

// exactArgs is cobra.ExactArgs with a message that names the missing arguments and exit code 2.
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s needs %d argument(s) (%s), got %d; see '%s --help'",
				cmd.CommandPath(), n, strings.Join(names, " "), len(args), cmd.CommandPath())
		}
		return nil
	}
}

// minimumArgs is cobra.MinimumNArgs with exit code 2.
func minimumArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs at least %d argument(s) (%s); see '%s --help'",
				cmd.CommandPath(), n, strings.Join(names, " "), cmd.CommandPath())
		}
		return nil
	}
}
