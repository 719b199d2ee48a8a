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

// AddOutputFlag registers -o/--output on a command.
func AddOutputFlag(fs *pflag.FlagSet, o *OutputFormat) {
	*o = OutputText
	fs.VarP(o, "output", "o", "report format: text or json")
}

// Report writes v as indented JSON, or calls text to write the human form.
func Report(cmd *cobra.Command, format OutputFormat, v any, text func(w io.Writer) error) error {
	w := redact.Writer(cmd.OutOrStdout()) // a report shows URLs; never their credentials
	if format == OutputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(w)
}
