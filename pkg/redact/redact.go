// Package redact keeps credentials out of everything flatcar-capo shows or stores: the userinfo
// of URLs (http://user:SECRET@mirror/), secret-looking query parameters, and the password, token
// and secret values of a server's error body, which is also cut to a bounded excerpt.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// mask replaces a secret.
const mask = "REDACTED"

// URL returns raw with its userinfo replaced by Mask and the values of secret-looking query
// parameters masked. A string that does not parse as a URL goes through String.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return String(raw)
	}
	out := raw
	if u.User != nil {
		out = userinfo.ReplaceAllString(out, "${1}"+mask+"@")
	}
	// Edit the query in place: re-encoding the URL would escape a {channel} template.
	if i := strings.IndexByte(out, '?'); i >= 0 && u.RawQuery != "" {
		params := strings.Split(out[i+1:], "&")
		for j, p := range params {
			k, _, ok := strings.Cut(p, "=")
			if ok && secretName.MatchString(k) {
				params[j] = k + "=" + mask
			}
		}
		out = out[:i+1] + strings.Join(params, "&")
	}
	return out
}

var (
	// scheme://userinfo@ anywhere in a text; userinfo stops at whitespace, quotes and '/'.
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@"'<>]+@`)
	// A key that names a secret (password, passwd, secret, token, credential, api key, auth
	// header, signature), as a JSON member, a YAML/header "key: value" or a "key=value".
	secretName = regexp.MustCompile(`(?i)(pass(word|wd)?|secret|token|credential|api[_-]?key|authorization|signature|sig|session|cookie)`)
	jsonMember = regexp.MustCompile(`(?i)("[A-Za-z0-9_.-]*(?:pass(?:word|wd)?|secret|token|credential|api[_-]?key|authorization|cookie)[A-Za-z0-9_.-]*"\s*:\s*)("(?:[^"\\]|\\.)*"|[^,{}\[\]\s]+)`)
	keyValue   = regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]*(?:pass(?:word|wd)?|secret|token|credential|api[_-]?key|authorization|cookie)[A-Za-z0-9_.-]*)(\s*[=:]\s*)("[^"]*"|'[^']*'|(?:Bearer\s+|Basic\s+)?[^\s&,;"'<>{}\[\]]+)`)
)

var (
	literalMu sync.RWMutex
	literals  []string
)

// Secret registers a value that must never be shown (a password taken from a URL or a
// clouds.yaml); String masks it wherever it appears, and its encodings too: a
// server that echoes it base64-, URL- or JSON-encoded must not get it out either. Values under 4
// bytes are ignored: masking "a" everywhere would garble the text and protect nothing.
func Secret(s string) {
	if len(s) < 4 {
		return
	}
	literalMu.Lock()
	defer literalMu.Unlock()
	for _, e := range encodings(s) {
		if len(e) >= 4 && !slices.Contains(literals, e) {
			literals = append(literals, e)
		}
	}
	// Longest first: an encoding that contains another is masked whole.
	slices.SortStableFunc(literals, func(a, b string) int { return len(b) - len(a) })
}

// encodings are the forms of secret a text may carry it in: itself, URL path and query escaped,
// JSON escaped, base64 (standard and URL alphabets, padded or not), and, for secrets of 8 bytes
// or more, the part of its base64 that stays the same wherever it sits in a longer base64 text
// (user:password in a Basic header, a docker config's auth).
func encodings(secret string) []string {
	out := []string{secret, url.PathEscape(secret), url.QueryEscape(secret), jsonEscaped(secret, true), jsonEscaped(secret, false)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(secret)))
	}
	if n := len(secret); n >= 8 {
		for k := 0; k < 3; k++ { // the secret's offset in the encoded text, modulo 3
			b := append(make([]byte, k), secret...)
			first := (8*k + 5) / 6    // the first character made of the secret's bits only
			last := (8*(k+n) - 6) / 6 // the last one
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				if e := enc.EncodeToString(b); last >= first+4 {
					out = append(out, e[first:last+1])
				}
			}
		}
	}
	return out
}

func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	enc.Encode(s)
	quoted := strings.TrimSuffix(b.String(), "\n")
	return quoted[1 : len(quoted)-1]
}

// SecretsOfURL registers the password (and the user name, which may be a token) of raw.
func SecretsOfURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return
	}
	if p, ok := u.User.Password(); ok {
		Secret(p) // and its encodings
	} else {
		Secret(u.User.Username()) // https://TOKEN@host: the name is the secret
	}
}

// Known masks every URL userinfo and every registered secret in s, and nothing else: what the
// output writers apply, since a report or a manifest may rightly hold "secretName: x".
func Known(s string) string {
	if s == "" {
		return s
	}
	s = userinfo.ReplaceAllString(s, "${1}"+mask+"@")
	return literalsOut(s)
}

// String is Known plus every secret-looking value (password=..., "token": "...",
// X-Auth-Token: ...): for error messages and the bodies servers send back.
func String(s string) string {
	if s == "" {
		return s
	}
	s = userinfo.ReplaceAllString(s, "${1}"+mask+"@")
	s = jsonMember.ReplaceAllStringFunc(s, func(m string) string {
		sub := jsonMember.FindStringSubmatch(m)
		if !secretKey(strings.Trim(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sub[1]), ":")), `"`)) {
			return m
		}
		return sub[1] + `"` + mask + `"`
	})
	s = keyValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := keyValue.FindStringSubmatch(m)
		if strings.HasPrefix(sub[3], mask) || strings.HasPrefix(sub[3], `"`+mask) || !secretKey(sub[1]) {
			return m
		}
		return sub[1] + sub[2] + mask
	})
	return literalsOut(s)
}

// secretKey tells whether key names a secret: its last word (split at _ . - and at a
// lower-to-upper case change) is one of the secret words, or it ends in "password"/"passwd"
// ("os_password", "X-Auth-Token", "clientSecret", "apiKey", "userpassword"). A name that merely
// ends in such letters is no key: the cloud "badpass" in "cloud badpass: authenticating at ..."
// is followed by prose, not by its password.
func secretKey(key string) bool {
	var words []string
	start := 0
	for i := 1; i <= len(key); i++ {
		if i == len(key) || strings.ContainsRune("_.-", rune(key[i])) ||
			(key[i] >= 'A' && key[i] <= 'Z' && key[i-1] >= 'a' && key[i-1] <= 'z') {
			if w := strings.Trim(key[start:i], "_.-"); w != "" {
				words = append(words, strings.ToLower(w))
			}
			start = i
		}
	}
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	switch last {
	case "pass", "password", "passwd", "pw", "pwd", "secret", "token", "credential", "credentials",
		"apikey", "authorization", "cookie", "passphrase":
		return true
	case "key":
		return len(words) > 1 && words[len(words)-2] == "api"
	}
	return strings.HasSuffix(last, "password") || strings.HasSuffix(last, "passwd")
}

func literalsOut(s string) string {
	literalMu.RLock()
	defer literalMu.RUnlock()
	for _, l := range literals {
		s = strings.ReplaceAll(s, l, mask)
	}
	return s
}

var (
	tags       = regexp.MustCompile(`(?s)<(script|style)\b.*?</(script|style)>|<[^>]*>`)
	spaces     = regexp.MustCompile(`\s+`)
	titleRegex = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
)

// Excerpt is what an error message may show of a server's response body: redacted, at most max
// bytes, on one line; an HTML page is reduced to its title and text.
func Excerpt(body []byte, max int) string {
	s := string(body)
	if looksHTML(s) {
		title := ""
		if m := titleRegex.FindStringSubmatch(s); m != nil {
			title = strings.TrimSpace(m[1])
		}
		s = tags.ReplaceAllString(s, " ")
		if title != "" && !strings.HasPrefix(strings.TrimSpace(s), title) {
			s = title + ": " + s
		}
		s = "an HTML page: " + s
	}
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	s = String(s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "... (" + strconv.Itoa(len(body)) + " bytes in all)"
	}
	return s
}

func looksHTML(s string) bool {
	head := strings.ToLower(strings.TrimSpace(s))
	head = head[:min(len(head), 512)]
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") || strings.Contains(head, "<body") || strings.Contains(head, "<head")
}

// Writer masks secrets in everything written through it (Known on each write). Writers of
// whole lines (fmt.Fprintf of a message) are what it is for; it keeps w's Fd, so a terminal is
// still recognised as one.
func Writer(w io.Writer) io.Writer {
	if f, ok := w.(fder); ok {
		return &fdWriter{writer{w}, f}
	}
	return writer{w}
}

type fder interface{ Fd() uintptr }

type writer struct{ w io.Writer }

func (r writer) Write(p []byte) (int, error) {
	s := Known(string(p))
	if s == string(p) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

type fdWriter struct {
	writer
	f fder
}

func (r *fdWriter) Fd() uintptr { return r.f.Fd() }
