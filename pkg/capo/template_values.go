package capo

import (
	"errors"
	"strings"

	"gopkg.in/yaml.v3"
)

// refError is a variable reference clusterctl refuses, at a line of the file.
type refError struct {
	line int
	err  error
}

// resolveNodeDefaults gives every scalar (keys too) of n the text clusterctl's defaults make of
// it. clusterctl substitutes the file's text before YAML parses it, so an unquoted value such as
// ${FLATCAR_DISABLE_AUTO_UPDATE:=true} is the boolean true, and a quoted one stays a string.
func resolveNodeDefaults(n *yaml.Node) []refError {
	var out []refError
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			v, _, err := resolveDefaults(n.Value)
			var re *RefError
			switch {
			case errors.As(err, &re):
				out = append(out, refError{line: n.Line, err: errors.New(re.Describe())})
			case v != n.Value:
				n.Value = v
				if n.Style == 0 && n.Tag == "!!str" {
					n.Tag = "" // typed again from the new text, as YAML types it
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

// withSampleValues fills every reference of s with sampleValue's stand-in of its variable (the
// operators applied, as clusterctl would), for checks that need a value of the right shape.
func withSampleValues(s string) string {
	refs, _, err := scanTemplate(s)
	if err != nil || len(refs) == 0 {
		return s
	}
	var b strings.Builder
	pos := 0
	for _, r := range refs {
		b.WriteString(s[pos:r.start])
		b.WriteString(evalRef(r.text(s), sampleValue))
		pos = r.end
	}
	b.WriteString(s[pos:])
	return b.String()
}

// isClusterctlTemplate tells a clusterctl template from a manifest for kubectl: a template
// escapes the node's variables ("$$"), or references a variable that is not one of
// coreos-metadata's (COREOS_*, which a rendered manifest keeps for the node's envsubst).
func isClusterctlTemplate(data []byte) bool {
	s := string(data)
	if strings.Contains(s, "$$") {
		return true
	}
	for rest := s; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			return false
		}
		rest = rest[i+2:]
		if !strings.HasPrefix(strings.TrimLeft(rest, "#"), "COREOS_") {
			return true
		}
	}
}
