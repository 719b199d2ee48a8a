package capo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// Document is one YAML document of a manifest file, kept both as a node tree (for line numbers)
// and as plain maps (for the rules).
type Document struct {
	File       string `json:"file"`
	Index      int    `json:"index"` // position in the file, from 0
	Line       int    `json:"line"`  // first line of the document
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`

	node *yaml.Node
	obj  map[string]any
	// refErrors are the clusterctl variable references of a template that clusterctl refuses
	// (ParseTemplateDocuments only).
	refErrors []refError
}

// Group is the API group of the document's apiVersion ("" for core).
func (d *Document) Group() string {
	if i := strings.IndexByte(d.APIVersion, '/'); i >= 0 {
		return d.APIVersion[:i]
	}
	return ""
}

// String names the document for humans: "file#2 (KubeadmConfigTemplate ns/name)".
func (d *Document) String() string {
	id := d.Name
	if d.Namespace != "" {
		id = d.Namespace + "/" + d.Name
	}
	return fmt.Sprintf("%s#%d (%s %s, line %d)", d.File, d.Index, d.Kind, id, d.Line)
}

// ParseDocuments splits a multi-document YAML stream. Empty documents are skipped; a syntax
// error ends the stream and is returned together with the documents read before it.
func ParseDocuments(file string, data []byte) ([]*Document, error) {
	return parseDocuments(file, data, false)
}

// parseTemplateDocuments is ParseDocuments for a clusterctl template: each value is read as
// clusterctl's variable defaults make it (ResolveDefaults, then typed again as YAML types an
// unquoted value), so rules check what a default gives; references without a default stay
// verbatim.
func parseTemplateDocuments(file string, data []byte) ([]*Document, error) {
	return parseDocuments(file, data, true)
}

func parseDocuments(file string, data []byte, template bool) ([]*Document, error) {
	var docs []*Document
	err := eachDocument(file, data, template, 0, func(d *Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

// eachDocument decodes data one document at a time and hands each to fn, so that a caller
// keeps only what it needs (lint). maxBytes > 0 refuses a document larger than that, before its
// tree is built. fn's error ends the stream and is returned as it is.
func eachDocument(file string, data []byte, template bool, maxBytes int64, fn func(*Document) error) error {
	lr := &docLimitReader{r: bytes.NewReader(data), limit: maxBytes}
	dec := yaml.NewDecoder(lr)
	for index := 0; ; index++ {
		var root yaml.Node
		lr.n = 0
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if lr.exceeded {
			return errs.Invalidf("%s: document %d is larger than %s, more than a Kubernetes object can be (etcd takes at most 1.5 MiB): is it the right file?",
				file, index, infile.Size(maxBytes))
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", file, index, err)
		}
		if len(root.Content) == 0 || root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null" {
			continue
		}
		node := root.Content[0]
		if node.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: document %d (line %d) is not a mapping", file, index, node.Line)
		}
		var refErrs []refError
		if template {
			refErrs = resolveNodeDefaults(node)
		}
		var obj map[string]any
		if err := node.Decode(&obj); err != nil {
			return fmt.Errorf("%s: document %d (line %d): %w", file, index, node.Line, err)
		}
		if err := fn(&Document{File: file, Index: index, Line: node.Line, node: node, obj: obj, refErrors: refErrs,
			APIVersion: getString(obj, "apiVersion"), Kind: getString(obj, "kind"),
			Name: getString(obj, "metadata", "name"), Namespace: getString(obj, "metadata", "namespace")}); err != nil {
			return err
		}
	}
}

// docLimitReader fails a read once limit bytes were read since n was reset (limit 0: never).
type docLimitReader struct {
	r        io.Reader
	n, limit int64
	exceeded bool
}

func (l *docLimitReader) Read(p []byte) (int, error) {
	if l.limit > 0 && l.n >= l.limit {
		l.exceeded = true
		return 0, errors.New("document too large")
	}
	if l.limit > 0 {
		p = p[:min(int64(len(p)), l.limit-l.n)]
	}
	k, err := l.r.Read(p)
	l.n += int64(k)
	return k, err
}

// Path is a field path: strings are keys, ints are list indices.
type Path []any

// Child returns a new path with elems appended (never aliasing p).
func (p Path) Child(elems ...any) Path {
	out := make(Path, 0, len(p)+len(elems))
	return append(append(out, p...), elems...)
}

// String renders the path as spec.files[2].encoding.
func (p Path) String() string {
	var b strings.Builder
	for _, e := range p {
		switch v := e.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(v) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// get follows path through maps and lists; ok is false when a step is missing.
func get(v any, path ...any) (any, bool) {
	for _, e := range path {
		switch k := e.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil, false
			}
			v = l[k]
		}
	}
	return v, true
}

func getString(v any, path ...any) string {
	x, _ := get(v, path...)
	s, _ := x.(string)
	return s
}

func getMap(v any, path ...any) map[string]any {
	x, _ := get(v, path...)
	m, _ := x.(map[string]any)
	return m
}

func getList(v any, path ...any) []any {
	x, _ := get(v, path...)
	l, _ := x.([]any)
	return l
}

// getStrings is the string elements of the list at path.
func getStrings(v any, path ...any) []string {
	var out []string
	for _, e := range getList(v, path...) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// walk follows path through the node tree; it returns the node at path (nil when a step is
// missing) and the line of the deepest step found (the document's first line when none is), so
// a finding about a missing field points at its parent.
func (d *Document) walk(path Path) (*yaml.Node, int) {
	n, line := d.node, d.Line
	for _, e := range path {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch k := e.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						line, next = n.Content[i].Line, n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
				line = next.Line
			}
		}
		if next == nil {
			return nil, line
		}
		n = next
	}
	return n, line
}
