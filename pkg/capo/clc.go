package capo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	clct "github.com/flatcar/container-linux-config-transpiler/config"
	ignition "github.com/flatcar/ignition/config/v2_3"
	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"github.com/flatcar/ignition/config/validate/report"
)

// CLCIssue is one entry of the transpiler's report. CABPK with `strict: false` (the default)
// drops the content behind a warning silently, so every issue matters.
type CLCIssue struct {
	Severity string `json:"severity"` // error, warning, info or deprecated, as the transpiler says
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Message  string `json:"message"`
}

func (i CLCIssue) String() string {
	switch {
	case i.Line > 0 && i.Column > 0:
		return fmt.Sprintf("%s at line %d, column %d: %s", i.Severity, i.Line, i.Column, i.Message)
	case i.Line > 0:
		return fmt.Sprintf("%s at line %d: %s", i.Severity, i.Line, i.Message)
	}
	return i.Severity + ": " + i.Message
}

// CLCResult is a Container Linux Config translated the way CABPK does it (transpiler v0.9.4,
// no platform, Ignition spec 2.3.0).
type CLCResult struct {
	Ignition igntypes.Config
	Issues   []CLCIssue
	// Fatal is true when the transpiler (or Ignition's own validation of its output) refused
	// the config: CABPK fails to produce bootstrap data at all.
	Fatal bool
}

// TranspileCLC translates a Container Linux Config to Ignition 2.3 and validates the result.
func TranspileCLC(src string) CLCResult {
	var res CLCResult
	cfg, ast, rep := clct.Parse([]byte(src))
	res.addReport(rep)
	if rep.IsFatal() {
		res.Fatal = true
		return res
	}
	ign, rep := clct.Convert(cfg, "", ast)
	res.addReport(rep)
	if rep.IsFatal() {
		res.Fatal = true
		return res
	}
	res.Ignition = ign
	if err := validateIgnition(ign); err != nil {
		res.Fatal = true
		res.Issues = append(res.Issues, CLCIssue{Severity: "error", Message: err.Error()})
	}
	return res
}

func (r *CLCResult) addReport(rep report.Report) {
	rep.Sort()
	for _, e := range rep.Entries {
		line := e.Line
		if line == 0 {
			line = yamlErrorLine(errors.New(e.Message)) // the YAML parser puts it in the text only
		}
		if lines, ok := yamlTypeErrors(e.Message); ok && e.Line == 0 {
			// One entry for every mistyped value: each is its own finding, at its own line.
			for _, l := range lines {
				r.Issues = append(r.Issues, CLCIssue{Severity: e.Kind.String(), Line: yamlErrorLine(errors.New(l)),
					Message: "yaml: " + l})
			}
			continue
		}
		r.Issues = append(r.Issues, CLCIssue{Severity: e.Kind.String(), Line: line, Column: e.Column,
			Message: strings.TrimSpace(e.Message)})
	}
}

// yamlTypeErrors splits yaml.v2's "yaml: unmarshal errors:" message into its "line N: ..." lines.
func yamlTypeErrors(msg string) ([]string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(msg), "yaml: unmarshal errors:")
	if !ok {
		return nil, false
	}
	var out []string
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "line ") {
			out = append(out, l)
		}
	}
	return out, len(out) > 0
}

// validateIgnition round-trips a config through Ignition's own 2.3 parser and validator, as
// the node's Ignition will read it.
func validateIgnition(cfg igntypes.Config) error {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding Ignition config: %w", err)
	}
	_, rep, err := ignition.Parse(raw)
	if err != nil {
		return fmt.Errorf("Ignition rejects the generated config: %v %s", err, rep.String())
	}
	if rep.IsFatal() {
		return fmt.Errorf("Ignition rejects the generated config: %s", rep.String())
	}
	return nil
}
