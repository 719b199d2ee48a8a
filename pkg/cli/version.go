package cli

import (
	"io"
	"runtime"
	"runtime/debug"

	"fmt"

	"github.com/spf13/cobra"
)

type versionReport struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	Commit    string `json:"commit,omitempty"`
}

func newVersionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the flatcar-capo version",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := versionReport{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						r.Commit = s.Value
					}
				}
			}
			return report(cmd, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "flatcar-capo %s (%s, %s)\n", r.Version, r.GoVersion, r.Platform)
				return err
			})
		},
	}
	addOutputFlag(cmd.Flags())
	return cmd
}
