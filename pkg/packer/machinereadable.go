package packer

import (
	"strconv"
	"strings"
)

// line is one line of `packer -machine-readable` output: timestamp,target,type,data...
type line struct {
	Timestamp int64
	Target    string // the build name ("qemu.flatcar"), empty for global lines
	Type      string // "ui", "artifact", "error-count", ...
	Data      []string
}

// parseLine splits a machine-readable line and undoes packer's escaping in the data fields
// (commas as %!(PACKER_COMMA), newlines and carriage returns as \n and \r). ok is false for lines
// that are not machine-readable (packer can print plain text before it parses its flags).
func parseLine(s string) (l line, ok bool) {
	f := strings.Split(strings.TrimRight(s, "\r\n"), ",")
	if len(f) < 3 {
		return line{}, false
	}
	ts, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || f[2] == "" {
		return line{}, false
	}
	l = line{Timestamp: ts, Target: f[1], Type: f[2]}
	for _, d := range f[3:] {
		l.Data = append(l.Data, unescaper.Replace(d))
	}
	return l, true
}

var unescaper = strings.NewReplacer(`%!(PACKER_COMMA)`, ",", `\n`, "\n", `\r`, "\r")

// UI returns the text of a `ui` line and its kind ("say", "message", "error"); ok is false for
// other line types.
func (l line) UI() (kind, text string, ok bool) {
	if l.Type != "ui" || len(l.Data) < 2 {
		return "", "", false
	}
	return l.Data[0], l.Data[1], true
}
