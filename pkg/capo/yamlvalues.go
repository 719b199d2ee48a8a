package capo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Values go into the template's text, as clusterctl puts them, and YAML then reads that text:
// written plain, "null", "~", "'q'", "&a x", "img #2" or " x" read back as another value, or
// none. A value that is a whole plain scalar of the template (name: ${VAR}) is written quoted
// when plain text would not read back as itself; one inside a longer value (${CLUSTER_NAME}-md-0,
// the Ignition config's paths and URLs) cannot be quoted, and checkRoundTrip refuses it when
// YAML would not read it back.

// integerVar says whether YAML must read the variable as a number (replicas).
func integerVar(name string) bool { return strings.HasSuffix(name, "_MACHINE_COUNT") }

var (
	wholeNumber = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})$`)
	plainKey    = regexp.MustCompile(`^[A-Za-z0-9_./-]+:$`)
)

// checkValues refuses the values that have a rule of their own: the cluster name (a Kubernetes
// name) and the machine counts (numbers). flag names where each value came from.
func checkValues(values map[string]string, flag func(string) string) error {
	for name, v := range values {
		if strings.Contains(v, "${") {
			continue // a reference clusterctl fills later
		}
		switch {
		case integerVar(name) && !wholeNumber.MatchString(v):
			return errs.Invalidf("%s %q: %s is a number of machines, a whole number such as 3", flag(name), v, name)
		case name == VarClusterName:
			if err := validClusterName(v); err != nil {
				return errs.Invalidf("%s %q: %v", flag(name), v, err)
			}
		}
	}
	return nil
}

// validClusterName checks a cluster name as clusterctl generate cluster does (an RFC 1123 DNS
// subdomain), and at most 63 characters: CAPI puts it in the cluster.x-k8s.io/cluster-name label
// of every Machine, and a label value is at most 63.
func validClusterName(name string) error {
	if len(validation.IsDNS1123Subdomain(name)) == 0 && len(name) <= validation.LabelValueMaxLength {
		return nil
	}
	return fmt.Errorf("not a Kubernetes cluster name: want lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, "+
		"at most %d characters (an RFC 1123 DNS subdomain, as clusterctl requires, that fits CAPI's cluster.x-k8s.io/cluster-name label), e.g. demo-1",
		validation.LabelValueMaxLength)
}

// plainString says whether v, written plain after "key: ", reads back as the string v.
func plainString(v string) bool {
	if v == "" || strings.ContainsAny(v, "\n\r\t") {
		return false
	}
	var n yaml.Node
	if yaml.Unmarshal([]byte("k: "+v+"\n"), &n) != nil || len(n.Content) != 1 || len(n.Content[0].Content) != 2 {
		return false
	}
	s := n.Content[0].Content[1]
	return s.Kind == yaml.ScalarNode && s.Style == 0 && s.Tag == "!!str" && s.Value == v && s.Anchor == "" && s.LineComment == ""
}

// quoteYAML is v as a YAML double-quoted scalar (JSON's string syntax, which YAML reads).
func quoteYAML(v string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// yamlString is v as a plain scalar when it reads back as itself, else quoted.
func yamlString(v string) string {
	if plainString(v) {
		return v
	}
	return quoteYAML(v)
}

// wholeScalar says whether r is a whole plain scalar of its line: "key: ${VAR}" or "- ${VAR}",
// nothing but a comment after it.
func wholeScalar(s string, r varRef) bool {
	before := s[strings.LastIndexByte(s[:r.start], '\n')+1 : r.start]
	after := s[r.end:]
	if i := strings.IndexByte(after, '\n'); i >= 0 {
		after = after[:i]
	}
	if t := strings.TrimLeft(after, " "); t != "" && (t == after || t[0] != '#') {
		return false
	}
	if before != "" && !strings.HasSuffix(before, " ") {
		return false
	}
	b := strings.TrimLeft(before, " ")
	for strings.HasPrefix(b, "- ") {
		b = strings.TrimLeft(b[2:], " ")
	}
	return b == "" || plainKey.MatchString(strings.TrimRight(b, " "))
}

// substituteYAML is substitute with each string value that is a whole scalar written so that
// YAML reads it back as given.
func substituteYAML(tmpl []byte, values map[string]string) ([]byte, []string, error) {
	return substitute(tmpl, values, func(s string, r varRef, v string) string {
		if integerVar(r.name) || strings.Contains(v, "${") || !wholeScalar(s, r) {
			return v
		}
		return yamlString(v)
	})
}

// checkRoundTrip refuses a value of filled (tmpl filled by substituteYAML with values) that
// YAML does not read back as given: tmpl is filled again with a stand-in token per value, both
// are parsed, and every scalar holding a token must read as the values make it, with the same
// type (a number for integerVar), inside the Ignition config's block text too.
func checkRoundTrip(tmpl, filled []byte, values map[string]string, flag func(string) string) error {
	c := roundTrip{byToken: map[string]tokenValue{}, flag: flag}
	seen := map[string]string{}
	probe, _, err := substitute(tmpl, values, func(_ string, r varRef, v string) string {
		key := r.name + "\x00" + v
		if t, ok := seen[key]; ok {
			return t
		}
		t := fmt.Sprintf("zqfcv%04dqz", len(seen))
		seen[key] = t
		c.byToken[t] = tokenValue{name: r.name, value: v}
		return t
	})
	if err != nil {
		return err
	}
	return c.documents(probe, filled)
}

type tokenValue struct{ name, value string }

type roundTrip struct {
	byToken map[string]tokenValue
	flag    func(string) string
}

var tokenPattern = regexp.MustCompile(`zqfcv[0-9]{4}qz`)

// documents compares two YAML streams document by document.
func (c roundTrip) documents(probe, filled []byte) error {
	pd, fd := yaml.NewDecoder(bytes.NewReader(probe)), yaml.NewDecoder(bytes.NewReader(filled))
	for {
		var p, f yaml.Node
		perr, ferr := pd.Decode(&p), fd.Decode(&f)
		if errors.Is(perr, io.EOF) && errors.Is(ferr, io.EOF) {
			return nil
		}
		if perr != nil {
			return nil // the template itself: not a value's doing, and validate reports it
		}
		if ferr != nil {
			return c.refuse(&p, "it breaks the YAML around it ("+ferr.Error()+")")
		}
		if err := c.compare(&p, &f); err != nil {
			return err
		}
	}
}

func (c roundTrip) compare(p, f *yaml.Node) error {
	if p.Kind != f.Kind || len(p.Content) != len(f.Content) || p.Anchor != f.Anchor || p.Kind == yaml.AliasNode {
		return c.refuse(p, "it changes the YAML around it")
	}
	if p.Kind == yaml.ScalarNode && tokenPattern.MatchString(p.Value) {
		if p.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			// Block text: the Ignition config (CLC), YAML of its own.
			if err := c.documents([]byte(p.Value), []byte(f.Value)); err != nil {
				return err
			}
			if yaml.Unmarshal([]byte(p.Value), new(yaml.Node)) == nil {
				return nil
			}
		}
		want := tokenPattern.ReplaceAllStringFunc(p.Value, func(t string) string { return c.byToken[t].value })
		wantTag := p.Tag
		if tv := c.byToken[p.Value]; tv.name != "" && integerVar(tv.name) {
			wantTag = "!!int"
		}
		if f.Value != want || f.Tag != wantTag {
			return c.refuse(p, fmt.Sprintf("YAML reads %q there (%s), not %q", f.Value, strings.TrimPrefix(f.Tag, "!!"), want))
		}
	}
	for i := range p.Content {
		if err := c.compare(p.Content[i], f.Content[i]); err != nil {
			return err
		}
	}
	return nil
}

// refuse names the first value in p and why YAML does not keep it.
func (c roundTrip) refuse(p *yaml.Node, why string) error {
	var tv tokenValue
	var find func(*yaml.Node) bool
	find = func(n *yaml.Node) bool {
		if t := tokenPattern.FindString(n.Value); t != "" {
			tv = c.byToken[t]
			return true
		}
		for _, k := range n.Content {
			if find(k) {
				return true
			}
		}
		return false
	}
	if !find(p) {
		return fmt.Errorf("the rendered template changes where no value is: %s", why)
	}
	return errs.Invalidf("%s %q cannot go into the template's %s: %s; the value is part of a longer one there, which cannot be quoted: "+
		"give one without line breaks, quotes, ': ', ' #' and surrounding spaces", c.flag(tv.name), tv.value, tv.name, why)
}
