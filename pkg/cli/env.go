package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// EnvPrefix is the prefix of the environment variables that set flags: --output-file is
// FLATCAR_CAPO_OUTPUT_FILE.
const EnvPrefix = "FLATCAR_CAPO_"

// EnvName returns the environment variable that sets a flag.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// extraEnv lists further variables a flag reads when its FLATCAR_CAPO_ one is unset, in order
// (for example FLATCAR_CHANNEL for --channel, as image-builder names it).
const extraEnvAnnotation = "flatcar-capo/env"

// AlsoFromEnv makes a flag also read the given environment variables (after FLATCAR_CAPO_<FLAG>).
func AlsoFromEnv(fs *pflag.FlagSet, flag string, vars ...string) {
	_ = fs.SetAnnotation(flag, extraEnvAnnotation, vars)
}

// applyEnvDefaults sets every flag the user did not give from its environment variable.
// A bad value is a usage error naming the variable.
func applyEnvDefaults(cmd *cobra.Command) error {
	var firstErr error
	visit := func(f *pflag.Flag) {
		if f.Changed || firstErr != nil || f.Name == "help" {
			return
		}
		names := append([]string{EnvName(f.Name)}, f.Annotations[extraEnvAnnotation]...)
		for _, name := range names {
			v, ok := os.LookupEnv(name)
			if !ok || v == "" {
				continue
			}
			if err := cmd.Flags().Set(f.Name, v); err != nil {
				firstErr = Usagef("invalid value %q in environment variable %s for --%s: %v", v, name, f.Name, err)
			}
			return
		}
	}
	cmd.Flags().VisitAll(visit)
	if firstErr != nil {
		return firstErr
	}
	return nil
}
