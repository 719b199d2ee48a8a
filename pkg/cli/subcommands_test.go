package cli_test

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/cli"
)

// Every command group, found by walking the command tree (so groups added later are covered),
// fails with "unknown command", exit 2, on an unknown subcommand; a typo of a real subcommand
// gets a suggestion; the bare group still prints its help.
func TestUnknownSubcommandFailsInEveryGroup(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		var subs []string
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || strings.HasPrefix(sub.Name(), "__") {
				continue
			}
			subs = append(subs, sub.Name())
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
		if len(subs) > 0 {
			groups = append(groups, append(append([]string{}, path...), subs[0]))
		}
	}
	walk(cli.NewRootCommand(), nil)
	names := map[string]bool{}
	for _, g := range groups {
		names[strings.Join(g[:len(g)-1], " ")] = true
	}
	for _, want := range []string{"", "oem", "completion"} {
		if !names[want] {
			t.Fatalf("the walk missed the group %q; found %v", want, names)
		}
	}
	for _, g := range groups {
		path, first := g[:len(g)-1], g[len(g)-1]
		t.Run("group "+strings.Join(path, " "), func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, path...), "no-such-subcommand", "x.img")
			testutil.Run(t, args...).MustFail(t, 2, "unknown command", `"no-such-subcommand"`)
			typo := first + "x" // one letter off a real subcommand
			args = append(append([]string{}, path...), typo, "x.img")
			testutil.Run(t, args...).MustFail(t, 2, "unknown command", "did you mean "+first)
			if len(path) > 0 {
				r := testutil.Run(t, path...).MustSucceed(t)
				if !strings.Contains(r.Stdout, "Available Commands") {
					t.Fatalf("bare %q does not print its help: %q", strings.Join(path, " "), r.Stdout)
				}
			}
		})
	}
}
