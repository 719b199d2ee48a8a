package capo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drone/envsubst/v2"
	"github.com/drone/envsubst/v2/parse"
)

// clusterctl's variable syntax is drone/envsubst's (the version clusterctl pins), so each
// reference is parsed and evaluated by that library itself: ${NAME}, the defaults ${NAME:=d},
// ${NAME:-d}, ${NAME=d} (and :? :+, which envsubst also treats as defaults), ${NAME%pat},
// ${NAME%%pat}, ${NAME#pat}, ${NAME##pat}, ${NAME/a/b}, ${NAME//a/b}, ${NAME/#a/b}, ${NAME/%a/b},
// ${NAME^}, ${NAME^^}, ${NAME,}, ${NAME,,}, ${NAME:pos}, ${NAME:pos:len}, ${#NAME}, defaults that
// hold references, and "$$" as an escaped dollar ("$${X}" reaches the node as "${X}"). A bare
// $NAME is text, and envsubst refuses ${NAME-d}. This file finds where each reference starts
// and ends, which envsubst does not tell, so a template can be filled in part.

// varRef is one variable reference found in a template.
type varRef struct {
	start, end int // byte range of the whole reference, "$" included
	name       string
	// hasDefault: a default operator gives a value when the variable is unset or empty.
	hasDefault bool
}

func (r varRef) text(tmpl string) string { return tmpl[r.start:r.end] }

// RefError is a reference clusterctl's envsubst refuses.
type RefError struct {
	Offset int    // byte offset of its "$"
	Text   string // the reference, up to its closing brace (or the rest of the line)
	Cause  string
}

func (e *RefError) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Describe()) }

// Describe is the error without its offset.
func (e *RefError) Describe() string {
	return fmt.Sprintf("%s: %s (clusterctl refuses it; escape it as $%s if it is meant for the node)", e.Text, e.Cause, e.Text)
}

// defaultOps are the envsubst functions that give a value to an unset or empty variable.
var defaultOps = []string{"=", ":=", ":-", ":?", ":+"}

// scanTemplate walks tmpl once and returns the references and the offsets of "$$" escapes.
func scanTemplate(tmpl string) (refs []varRef, escapes []int, err error) {
	for i := 0; i+1 < len(tmpl); i++ {
		if tmpl[i] != '$' {
			continue
		}
		switch tmpl[i+1] {
		case '$':
			escapes = append(escapes, i)
			i++
		case '{':
			ref, rerr := parseRef(tmpl, i)
			if rerr != nil {
				return nil, nil, rerr
			}
			refs = append(refs, ref)
			i = ref.end - 1
		}
	}
	return refs, escapes, nil
}

// parseRef parses the reference starting at tmpl[at:] ("${"): its end is the brace that closes
// it, counting the references nested in its arguments.
func parseRef(tmpl string, at int) (varRef, error) {
	depth, end := 0, -1
	for j := at; j < len(tmpl) && end < 0; j++ {
		switch {
		case tmpl[j] == '$' && j+1 < len(tmpl) && tmpl[j+1] == '{':
			depth++
			j++
		case tmpl[j] == '$' && j+1 < len(tmpl) && tmpl[j+1] == '$':
			j++
		case tmpl[j] == '}':
			if depth--; depth == 0 {
				end = j + 1
			}
		}
	}
	if end < 0 {
		line, _, _ := strings.Cut(tmpl[at:], "\n")
		return varRef{}, &RefError{Offset: at, Text: line, Cause: "no closing brace"}
	}
	text := tmpl[at:end]
	tree, err := parse.Parse(text)
	if err != nil {
		return varRef{}, &RefError{Offset: at, Text: text, Cause: err.Error()}
	}
	fn, ok := tree.Root.(*parse.FuncNode)
	if !ok {
		return varRef{}, &RefError{Offset: at, Text: text, Cause: "not one variable reference"}
	}
	return varRef{start: at, end: end, name: fn.Param, hasDefault: slices.Contains(defaultOps, fn.Name)}, nil
}

// evalRef evaluates one reference as clusterctl does, with lookup giving the variables' values
// ("" for an unset one).
func evalRef(text string, lookup func(string) string) string {
	out, err := envsubst.Eval(text, lookup)
	if err != nil {
		return text // parseRef accepted it, so envsubst does too
	}
	return out
}

// variables lists the variable names a template references, sorted and unique, as
// `clusterctl generate cluster --list-variables` does. Escaped "$${...}" are not variables.
func variables(tmpl []byte) ([]string, error) {
	refs, _, err := scanTemplate(string(tmpl))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range refs {
		names = append(names, r.name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// substitute fills the variables that values (or a default) provide. When every variable is
// filled the result is a plain manifest: "$$" escapes become "$" as clusterctl would make them.
// Otherwise it stays a clusterctl template: unfilled references and escapes are kept verbatim,
// and missing names the variables still to set. emit writes each filled reference r of tmpl,
// v its value as clusterctl's envsubst makes it.
func substitute(tmpl []byte, values map[string]string, emit func(tmpl string, r varRef, v string) string) (out []byte, missing []string, err error) {
	s := string(tmpl)
	refs, escapes, err := scanTemplate(s)
	if err != nil {
		return nil, nil, err
	}
	lookup := func(name string) string { return values[name] }
	for _, r := range refs {
		if _, ok := values[r.name]; !ok && !r.hasDefault {
			missing = append(missing, r.name)
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	// A default applies when the result is final; in a template still for clusterctl, an unset
	// variable with a default stays, for clusterctl to fill from the environment or its default.
	resolved := func(r varRef) bool {
		_, ok := values[r.name]
		return ok || r.hasDefault && len(missing) == 0
	}
	var b strings.Builder
	b.Grow(len(s))
	pos, ei := 0, 0
	for _, r := range refs {
		// Escapes before this reference.
		for ; ei < len(escapes) && escapes[ei] < r.start; ei++ {
			pos = writeEscape(&b, s, pos, escapes[ei], len(missing) == 0)
		}
		b.WriteString(s[pos:r.start])
		if resolved(r) {
			b.WriteString(emit(s, r, evalRef(r.text(s), lookup)))
		} else {
			b.WriteString(r.text(s))
		}
		pos = r.end
	}
	for ; ei < len(escapes); ei++ {
		pos = writeEscape(&b, s, pos, escapes[ei], len(missing) == 0)
	}
	b.WriteString(s[pos:])
	return []byte(b.String()), missing, nil
}

// resolveDefaults replaces each reference whose value its default gives (no variable needed)
// with that value, as clusterctl would with the variable unset, and keeps the others and the
// "$$" escapes verbatim: what lint checks of a template. unresolved names the references kept.
func resolveDefaults(s string) (out string, unresolved []string, err error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	refs, _, err := scanTemplate(s)
	if err != nil {
		return s, nil, err
	}
	var b strings.Builder
	pos := 0
	for _, r := range refs {
		b.WriteString(s[pos:r.start])
		if r.hasDefault {
			b.WriteString(evalRef(r.text(s), func(string) string { return "" }))
		} else {
			b.WriteString(r.text(s))
			unresolved = append(unresolved, r.text(s))
		}
		pos = r.end
	}
	b.WriteString(s[pos:])
	return b.String(), unresolved, nil
}

func writeEscape(b *strings.Builder, s string, pos, at int, unescape bool) int {
	b.WriteString(s[pos:at])
	if unescape {
		b.WriteByte('$')
	} else {
		b.WriteString("$$")
	}
	return at + 2
}
