package cli

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// interruptNotes say what a command leaves behind when Ctrl-C stops it, for the commands whose
// errors do not say it themselves (an *interrupt.Error does, and wins); every note is
// true whenever the command is stopped (outputs go through pkg/atomicfile or nothing is written).
var interruptNotes = map[string]string{
	"convert":   "nothing was left: OUT was not written (its temporary file was removed) and IN is untouched",
	"inspect":   "nothing was left: inspect only reads",
	"show":      "nothing was left: oem show only reads",
	"release":   "nothing was left: release only reads",
	"lint":      "nothing was left: lint only reads",
	"version":   "nothing was left: version only reads",
	"manifests": "nothing was left: --output-file was not written (its temporary file was removed)",
	"fetch":     "the output file was not written (its temporary file was removed)",
	// sysext create (the only "create")
	"create": "nothing was left: --output-file was not written (its temporary file and staging directory were removed); downloads that completed and verified stay in the cache",
}

// reportInterrupted tells what really happened when cmd was stopped by Ctrl-C or SIGTERM:
// the leftovers that exist, or that there are none, and an error that was not the interruption.
func reportInterrupted(w io.Writer, cmd *cobra.Command, err error) {
	path, note := "flatcar-capo", ""
	if cmd != nil {
		path, note = cmd.CommandPath(), interruptNotes[cmd.Name()]
	}
	if !interrupt.IsCancel(err) {
		// It failed on its own while being stopped: that failure is news too.
		fmt.Fprintf(w, "Error: %s\n", redact.String(err.Error()))
	}
	leftovers, clean, typed := interrupt.Report(err)
	switch {
	case len(leftovers) > 0:
		fmt.Fprintf(w, "Interrupted: %s stopped before finishing and left behind:\n", path)
		for _, l := range leftovers {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	case typed:
		fmt.Fprintf(w, "Interrupted: %s stopped before finishing; nothing was left behind: %s\n", path, strings.Join(clean, "; "))
	default:
		fmt.Fprintf(w, "Interrupted: %s stopped before finishing; %s\n", path, cmp.Or(note, "it did not say what it left behind; check its output paths"))
	}
}
