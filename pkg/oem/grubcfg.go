package oem

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Bounds on the OEM grub.cfg, far above the few lines Flatcar writes (a crafted file of 40
// self-doubling assignments once made inspect run out of memory): past them the file is refused.
const (
	maxGrubCfgBytes = 64 << 10
	maxGrubCfgLines = 1000
	// maxGrubValue bounds a variable's expanded value; a kernel command line is at most a few KiB.
	maxGrubValue = 8 << 10
)

// checkGrubConfig refuses a grub.cfg that is larger, longer or expands to longer values than
// the bounds, before anything else evaluates it; it costs one pass over at most 64 KiB.
func checkGrubConfig(data []byte) error {
	const crafted = "a damaged or crafted OEM partition; flatcar-capo refuses it"
	if len(data) > maxGrubCfgBytes {
		return fmt.Errorf("grub.cfg is %d bytes, more than the %d flatcar-capo reads (Flatcar's has a few lines): %s", len(data), maxGrubCfgBytes, crafted)
	}
	if n := bytes.Count(data, []byte("\n")) + 1; n > maxGrubCfgLines {
		return fmt.Errorf("grub.cfg has %d lines, more than the %d flatcar-capo reads (Flatcar's has a few): %s", n, maxGrubCfgLines, crafted)
	}
	if _, err := parseGrubConfig(data).evaluate(); err != nil {
		return fmt.Errorf("%w: %s", err, crafted)
	}
	return nil
}

// grubConfig is the OEM partition's grub.cfg as lines. GRUB sources the file after setting its own
// defaults, so a later `set var=...` overrides an earlier one; edits therefore change only the
// effective (last) assignment or append one, and keep every other line and comment as it was.
type grubConfig struct {
	lines []string
	// trailingNewline records whether the file ended with a newline, to render it back unchanged.
	trailingNewline bool
}

// Settings are the variables Flatcar's GRUB config reads from the OEM grub.cfg.
type Settings struct {
	OEMID        string `json:"oem_id"`
	LinuxAppend  string `json:"linux_append"`
	LinuxConsole string `json:"linux_console"`
}

// Variables whose values flatcar-capo reads and writes.
const (
	varOEMID        = "oem_id"
	varLinuxAppend  = "linux_append"
	varLinuxConsole = "linux_console"
)

// assignment matches `set name=value` with an optional quoted value.
var assignment = regexp.MustCompile(`^\s*set\s+([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$`)

// parseGrubConfig splits grub.cfg into lines.
func parseGrubConfig(data []byte) *grubConfig {
	s := string(data)
	g := &grubConfig{trailingNewline: strings.HasSuffix(s, "\n") || s == ""}
	s = strings.TrimSuffix(s, "\n")
	if s != "" {
		g.lines = strings.Split(s, "\n")
	}
	return g
}

// Bytes renders the configuration.
func (g *grubConfig) Bytes() []byte {
	s := strings.Join(g.lines, "\n")
	if g.trailingNewline && s != "" {
		s += "\n"
	}
	return []byte(s)
}

// depthChange tracks GRUB script blocks (if/fi, for/while/until ... done, function bodies) so that
// only top-level assignments are edited in place: an assignment inside a block may not run.
func depthChange(line string) int {
	f := strings.Fields(strings.TrimSpace(line))
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return 0
	}
	switch f[0] {
	case "if", "for", "while", "until", "function", "menuentry", "submenu":
		return 1
	case "fi", "done", "}":
		return -1
	}
	return 0
}

// scan walks the lines as GRUB would source them, calling fn for each assignment with the line
// index and whether it is at top level.
func (g *grubConfig) scan(fn func(i int, name, rawValue string, topLevel bool)) {
	depth := 0
	for i, line := range g.lines {
		if m := assignment.FindStringSubmatch(line); m != nil {
			fn(i, m[1], m[2], depth == 0)
		}
		depth = max(0, depth+depthChange(line))
	}
}

// Settings returns the values GRUB ends up with after sourcing the file (last assignment wins;
// $var references are expanded from the values set so far, as GRUB does).
// Evaluation stops at the first value longer than MaxGrubValue (cut there); CheckGrubConfig
// tells whether that happened.
func (g *grubConfig) Settings() Settings {
	s, _ := g.evaluate()
	return s
}

// evaluate sources the file with every value bounded by MaxGrubValue, failing at the first
// assignment that would expand past it.
func (g *grubConfig) evaluate() (Settings, error) {
	vars := map[string]string{}
	var err error
	g.scan(func(i int, name, raw string, _ bool) {
		if err != nil {
			return // past a bound: the rest is not evaluated
		}
		// The value is cut at the bound: one that doubles itself on every line would otherwise
		// grow without end.
		v := expand(raw, vars, maxGrubValue)
		if len(v) > maxGrubValue {
			v = v[:maxGrubValue]
			err = fmt.Errorf("grub.cfg line %d: $%s would expand to more than %d bytes", i+1, name, maxGrubValue)
		}
		vars[name] = v
	})
	return Settings{OEMID: vars[varOEMID], LinuxAppend: vars[varLinuxAppend], LinuxConsole: vars[varLinuxConsole]}, err
}

// Set makes name evaluate to value: the last top-level assignment is rewritten in place when
// nothing after it can reassign the variable; otherwise a new assignment is appended. The
// value must already be validated (no quote, $, backslash or newline).
func (g *grubConfig) Set(name, value string) {
	last, lastTop := -1, false
	g.scan(func(i int, n, _ string, top bool) {
		if n == name {
			last, lastTop = i, top
		}
	})
	line := `set ` + name + `="` + value + `"`
	if last >= 0 && lastTop {
		if g.lines[last] == line {
			return
		}
		indent := g.lines[last][:len(g.lines[last])-len(strings.TrimLeft(g.lines[last], " \t"))]
		g.lines[last] = indent + line
		return
	}
	g.lines = append(g.lines, line)
	g.trailingNewline = true
}

// expand evaluates a GRUB word the way `set` sees it: double quotes allow $var expansion,
// single quotes are literal, a bare word expands variables too. It stops once the result is
// longer than max.
func expand(raw string, vars map[string]string, max int) string {
	var b strings.Builder
	for i := 0; i < len(raw) && b.Len() <= max; i++ {
		c := raw[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(raw[i+1:], '\'')
			if j < 0 {
				b.WriteString(raw[i+1:])
				return b.String()
			}
			b.WriteString(raw[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			// double-quoted: copy with expansion until the closing quote
		case c == '\\' && i+1 < len(raw):
			i++
			b.WriteByte(raw[i])
		case c == '$':
			name, n := varRef(raw[i+1:])
			if n == 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(vars[name])
			i += n
		case c == '#' && b.Len() == 0 && i == 0:
			return ""
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// varRef parses `name` or `{name}` after a `$`, returning the name and the bytes consumed.
func varRef(s string) (string, int) {
	if strings.HasPrefix(s, "{") {
		if j := strings.IndexByte(s, '}'); j > 1 {
			return s[1:j], j + 1
		}
		return "", 0
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}
