package capo

import (
	"fmt"
	"slices"
	"strings"
)

// The subset of clusterctl's variable syntax (drone/envsubst) that cluster templates use:
// ${NAME}, ${NAME:=default}, ${NAME:-default}, ${NAME=default}, ${NAME-default}, bare $NAME,
// and $$ as an escaped dollar ("$${X}" reaches the node as "${X}").

// varRef is one variable reference found in a template.
type varRef struct {
	start, end int // byte range of the whole reference, "$" included
	name       string
	def        *string // default value, nil when there is none
	emptyToDef bool    // ":=" and ":-" also apply the default to an empty value
}

// scanTemplate walks tmpl once and returns the references and the offsets of "$$" escapes.
func scanTemplate(tmpl string) (refs []varRef, escapes []int, err error) {
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' || i+1 >= len(tmpl) {
			continue
		}
		switch c := tmpl[i+1]; {
		case c == '$':
			escapes = append(escapes, i)
			i++
		case c == '{':
			end := strings.IndexByte(tmpl[i+2:], '}')
			if end < 0 {
				return nil, nil, fmt.Errorf("unterminated ${ at byte %d", i)
			}
			body := tmpl[i+2 : i+2+end]
			ref, perr := parseRefBody(body)
			if perr != nil {
				return nil, nil, fmt.Errorf("${%s} at byte %d: %w", body, i, perr)
			}
			ref.start, ref.end = i, i+3+end
			refs = append(refs, ref)
			i = ref.end - 1
		case isNameStart(c):
			j := i + 1
			for j < len(tmpl) && isNameChar(tmpl[j]) {
				j++
			}
			refs = append(refs, varRef{start: i, end: j, name: tmpl[i+1 : j]})
			i = j - 1
		}
	}
	return refs, escapes, nil
}

func parseRefBody(body string) (varRef, error) {
	n := 0
	for n < len(body) && isNameChar(body[n]) {
		n++
	}
	if n == 0 || !isNameStart(body[0]) {
		return varRef{}, fmt.Errorf("not a variable name")
	}
	ref := varRef{name: body[:n]}
	rest := body[n:]
	for _, op := range []string{":=", ":-", "=", "-"} {
		if strings.HasPrefix(rest, op) {
			def := rest[len(op):]
			ref.def, ref.emptyToDef = &def, op[0] == ':'
			return ref, nil
		}
	}
	if rest != "" {
		return varRef{}, fmt.Errorf("unsupported expression %q (escape it as $${...} if it is meant for the node)", rest)
	}
	return ref, nil
}

func isNameStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isNameChar(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// Variables lists the variable names a template references, sorted and unique, as
// `clusterctl generate cluster --list-variables` does. Escaped "$${...}" are not variables.
func Variables(tmpl []byte) ([]string, error) {
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

// Substitute fills the variables that values (or a default) provide. When every variable is
// filled the result is a plain manifest: "$$" escapes become "$" as clusterctl would make them.
// Otherwise it stays a clusterctl template: unfilled references and escapes are kept verbatim,
// and missing names the variables still to set.
func Substitute(tmpl []byte, values map[string]string) (out []byte, missing []string, err error) {
	s := string(tmpl)
	refs, escapes, err := scanTemplate(s)
	if err != nil {
		return nil, nil, err
	}
	resolve := func(r varRef) (string, bool) {
		v, ok := values[r.name]
		switch {
		case ok && (v != "" || !r.emptyToDef):
			return v, true
		case r.def != nil:
			return *r.def, true
		}
		return "", false
	}
	for _, r := range refs {
		if _, ok := resolve(r); !ok {
			missing = append(missing, r.name)
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	var b strings.Builder
	b.Grow(len(s))
	pos, ei := 0, 0
	for _, r := range refs {
		// Escapes before this reference.
		for ; ei < len(escapes) && escapes[ei] < r.start; ei++ {
			pos = writeEscape(&b, s, pos, escapes[ei], len(missing) == 0)
		}
		b.WriteString(s[pos:r.start])
		if v, ok := resolve(r); ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[r.start:r.end])
		}
		pos = r.end
	}
	for ; ei < len(escapes); ei++ {
		pos = writeEscape(&b, s, pos, escapes[ei], len(missing) == 0)
	}
	b.WriteString(s[pos:])
	return []byte(b.String()), missing, nil
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
