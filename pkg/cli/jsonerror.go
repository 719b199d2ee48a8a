package cli

import (
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// countingWriter tells whether a command wrote its report before failing (inspect's NOT READY
// verdict is a report), so that the JSON error object is written only to an empty stdout.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Fd keeps a terminal recognisable through the wrapper.
func (c *countingWriter) Fd() uintptr {
	if f, ok := c.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// jsonError is what a command run with -o json prints on stdout when it fails: a script that
// saves stdout (> build-record.json) gets the reason and the leftovers, not an empty file.
type jsonError struct {
	Error    string   `json:"error"`
	ExitCode int      `json:"exitCode"`
	Left     []string `json:"left"`
}

var urlInArg = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s]+`)

// registerURLSecrets makes the credentials of every URL among the arguments and the
// FLATCAR_CAPO_* variables secrets that redact masks wherever they would appear.
func registerURLSecrets(args []string) {
	vals := append([]string(nil), args...)
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, envPrefix) {
			vals = append(vals, e)
		}
	}
	for _, v := range vals {
		for _, u := range urlInArg.FindAllString(v, -1) {
			for _, part := range strings.Split(u, ",") {
				redact.SecretsOfURL(part)
			}
		}
	}
}
