package capo

import (
	"os"
	"strings"
	"testing"
)

// docs/lint-rules.md documents every rule with its id and severity.
func TestLintRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/lint-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if !strings.Contains(string(doc), "| `"+r.ID+"` | "+string(r.Severity)+" |") {
			t.Errorf("docs/lint-rules.md has no row | `%s` | %s |", r.ID, r.Severity)
		}
	}
}
