package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// outputFormat is the value of -o/--output.
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
)

// String, Set and Type make OutputFormat a pflag.Value that rejects anything but text|json.
func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "text|json" }
func (o *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case outputText, outputJSON:
		*o = outputFormat(v)
		return nil
	}
	return fmt.Errorf("must be text or json, not %q", v)
}

// addOutputFlag registers -o/--output on a command; Report and wantsJSON read it.
func addOutputFlag(fs *pflag.FlagSet) {
	o := outputText
	fs.VarP(&o, "output", "o", "report format: text or json")
}

// nonNil makes a nil slice empty, so that a JSON report shows [] and not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// wantsJSON tells whether cmd was asked for -o json (flag or FLATCAR_CAPO_OUTPUT).
func wantsJSON(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("output")
	return f != nil && f.Value.Type() == "text|json" && f.Value.String() == string(outputJSON)
}

// report writes v as indented JSON when cmd runs with -o json, or calls text to write the
// human form.
func report(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	w := redact.Writer(cmd.OutOrStdout()) // a report shows URLs; never their credentials
	if wantsJSON(cmd) {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(w)
}
