package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// OutputFormat is the value of -o/--output.
type OutputFormat string

const (
	OutputText OutputFormat = "text"
	OutputJSON OutputFormat = "json"
)

// String, Set and Type make OutputFormat a pflag.Value that rejects anything but text|json.
func (o *OutputFormat) String() string { return string(*o) }
func (o *OutputFormat) Type() string   { return "text|json" }
func (o *OutputFormat) Set(v string) error {
	switch OutputFormat(v) {
	case OutputText, OutputJSON:
		*o = OutputFormat(v)
		return nil
	}
	return fmt.Errorf("must be text or json, not %q", v)
}

// AddOutputFlag registers -o/--output on a command; Report and wantsJSON read it.
func AddOutputFlag(fs *pflag.FlagSet) {
	o := OutputText
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
	return f != nil && f.Value.Type() == "text|json" && f.Value.String() == string(OutputJSON)
}

// Report writes v as indented JSON when cmd runs with -o json, or calls text to write the
// human form.
func Report(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	w := redact.Writer(cmd.OutOrStdout()) // a report shows URLs; never their credentials
	if wantsJSON(cmd) {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(w)
}
