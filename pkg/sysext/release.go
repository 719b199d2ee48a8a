package sysext

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Release is an os-release or extension-release file: KEY=VALUE pairs (os-release(5)).
type Release map[string]string

// parseRelease parses os-release(5) syntax: comments, blank lines, and values that may be
// single- or double-quoted with backslash escapes inside double quotes.
func parseRelease(data []byte) (Release, error) {
	r := Release{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		key, val, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'") {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", line, s)
		}
		v, err := unquote(val)
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", line, key, err)
		}
		r[key] = v
	}
	return r, sc.Err()
}

func unquote(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch q := v[0]; q {
	case '"', '\'':
		if len(v) < 2 || v[len(v)-1] != q {
			return "", fmt.Errorf("unterminated %c quote in %s", q, v)
		}
		inner := v[1 : len(v)-1]
		if q == '\'' {
			return inner, nil
		}
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			if inner[i] == '\\' && i+1 < len(inner) {
				i++
			}
			b.WriteByte(inner[i])
		}
		return b.String(), nil
	}
	return v, nil
}

// Format renders r with the given keys first, in order, then the rest sorted; values that
// need it are double-quoted.
func (r Release) Format(first ...string) []byte {
	var b strings.Builder
	seen := map[string]bool{}
	write := func(k string) {
		if v, ok := r[k]; ok && !seen[k] {
			seen[k] = true
			fmt.Fprintf(&b, "%s=%s\n", k, quoteIfNeeded(v))
		}
	}
	for _, k := range first {
		write(k)
	}
	for _, k := range slices.Sorted(maps.Keys(r)) {
		write(k)
	}
	return []byte(b.String())
}

func quoteIfNeeded(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\"'\\$`#;") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return `"` + r.Replace(v) + `"`
}
