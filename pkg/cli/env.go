package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix is the prefix of the environment variables that set flags: --output-file is
// FLATCAR_CAPO_OUTPUT_FILE.
const envPrefix = "FLATCAR_CAPO_"

// envName returns the environment variable that sets a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// extraEnv lists further variables a flag reads when its FLATCAR_CAPO_ one is unset, in order
// (for example FLATCAR_CHANNEL for --channel, as image-builder names it).
const extraEnvAnnotation = "flatcar-capo/env"

// alsoFromEnv makes a flag also read the given environment variables (after FLATCAR_CAPO_<FLAG>).
func alsoFromEnv(fs *pflag.FlagSet, flag string, vars ...string) {
	_ = fs.SetAnnotation(flag, extraEnvAnnotation, vars)
}

// envListFlags are the repeatable flags whose values never contain a comma, wherever they
// appear: their environment variable holds a comma-separated list (FLATCAR_CAPO_CLOUD=a,b is
// --cloud a --cloud b; image refs have no commas either). Others (--set, --property: KEY=a,b
// is a legitimate value) take the whole variable as one value.
var envListFlags = map[string]bool{"cloud": true, "tag": true, "image": true, "enable-sysext": true}

func isRepeatable(f *pflag.Flag) bool {
	t := f.Value.Type()
	return t == "stringArray" || t == "stringSlice"
}

func isEnvList(f *pflag.Flag) bool {
	return isRepeatable(f) && envListFlags[f.Name]
}

// documentEnv says in the help of every repeatable flag of the tree how its environment
// variable is read, since the two kinds differ.
func documentEnv(c *cobra.Command) {
	for _, sub := range c.Commands() {
		documentEnv(sub)
	}
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if !isRepeatable(f) || strings.Contains(f.Usage, envName(f.Name)) {
			return
		}
		if isEnvList(f) {
			f.Usage += fmt.Sprintf("; $%s takes a comma-separated list (a,b is two values)", envName(f.Name))
		} else {
			f.Usage += fmt.Sprintf("; $%s is one value, commas included", envName(f.Name))
		}
	})
}

// applyEnvDefaults sets every flag the user did not give from its environment variable.
// A bad value is a usage error naming the variable. A DANGEROUS flag turned on by the
// environment gets a warning naming the variable, as loud as the flag's own.
func applyEnvDefaults(cmd *cobra.Command) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil || f.Name == "help" {
			return
		}
		names := append([]string{envName(f.Name)}, f.Annotations[extraEnvAnnotation]...)
		for _, name := range names {
			v, ok := os.LookupEnv(name)
			if !ok || v == "" {
				continue
			}
			values := []string{v}
			if isEnvList(f) {
				values = splitList(v)
			}
			for _, one := range values {
				if err := cmd.Flags().Set(f.Name, one); err != nil {
					firstErr = usagef("invalid value %q in environment variable %s for --%s: %v", v, name, f.Name, err)
					return
				}
			}
			if strings.HasPrefix(f.Usage, "DANGEROUS") && f.Value.String() != "false" {
				fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: --%s is ON because the environment variable %s=%s is set: %s."+
					" Unset %s unless you mean it.\n", f.Name, name, v, strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(f.Usage, "DANGEROUS"), ":")), name)
			}
			return
		}
	})
	return firstErr
}

// splitList splits a comma-separated list, dropping blanks around and between items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
