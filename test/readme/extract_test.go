package readme

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// SkipMarker is the HTML comment, invisible in rendered Markdown, that exempts the code block right
// after it from the README test: <!-- readme-test: skip (why) -->. The reason is required.
const SkipMarker = "<!-- readme-test: skip (why) -->"

// skipComment matches SkipMarker with its reason.
var skipComment = regexp.MustCompile(`^<!--\s*readme-test:\s*skip\s*\((.+)\)\s*-->$`)

// visibleMarker is the old in-block comment a reader saw in the rendered README; it is refused.
const visibleMarker = "not run by the README test"

// Line is one logical command line of a README code block.
type Line struct {
	Number int    // 1-based line in the README where it starts
	Lang   string // the code block's language
	Text   string // continuation lines joined
	Skip   string // the reason of the SkipMarker before its block; "" = must run
}

// Command is a runnable flatcar-capo line.
type Command struct {
	Line
	Env      []string // leading NAME=value assignments
	Args     []string // after "flatcar-capo"
	Stdout   string   // "> FILE" redirection, "" = none
	WantCode int      // from a trailing "# exits N" comment
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Lines returns every logical line of the README's fenced code blocks. Lines of shell blocks are
// returned one by one (comment-only and blank lines dropped); a block in another language is
// returned as one Line so its marker (or lack of one) can be checked. A SkipMarker line gives its
// reason to every line of the block that follows it; a marker followed by anything but a code
// block, a marker without a reason, and the old visible in-block marker are errors.
func Lines(r io.Reader) ([]Line, error) {
	var (
		out       []Line
		inBlock   bool
		lang      string
		block     []string
		start     int
		pending   string
		pendAt    int
		n         int
		skipNext  string // reason of a SkipMarker waiting for its block
		skipAt    int
		blockSkip string
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		n++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if strings.Contains(text, visibleMarker) {
			return nil, fmt.Errorf("README.md:%d: a visible %q comment: put %s on the line before the block instead", n, visibleMarker, SkipMarker)
		}
		if !inBlock && strings.HasPrefix(trimmed, "<!--") && strings.Contains(trimmed, "readme-test") {
			m := skipComment.FindStringSubmatch(trimmed)
			if m == nil || strings.TrimSpace(m[1]) == "" {
				return nil, fmt.Errorf("README.md:%d: %q is not %s (a reason is required)", n, trimmed, SkipMarker)
			}
			skipNext, skipAt = strings.TrimSpace(m[1]), n
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			if !inBlock {
				inBlock, lang, block, start = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), nil, n+1
				blockSkip, skipNext = skipNext, ""
				continue
			}
			inBlock = false
			if pending != "" {
				return nil, fmt.Errorf("README.md:%d: a line continuation (\\) runs into the end of the block", pendAt)
			}
			if !shellLangs[lang] {
				out = append(out, Line{Number: start, Lang: lang, Text: strings.Join(block, "\n"), Skip: blockSkip})
			}
			continue
		}
		if !inBlock {
			if skipNext != "" && trimmed != "" {
				return nil, fmt.Errorf("README.md:%d: the %s of line %d is not followed by a code block", n, SkipMarker, skipAt)
			}
			continue
		}
		block = append(block, text)
		if !shellLangs[lang] {
			continue
		}
		if pending == "" {
			pendAt = n
		}
		if strings.HasSuffix(trimmed, "\\") {
			pending += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		full := strings.TrimSpace(pending + trimmed)
		pending = ""
		if full == "" || strings.HasPrefix(full, "#") {
			continue
		}
		out = append(out, Line{Number: pendAt, Lang: lang, Text: full, Skip: blockSkip})
	}
	if inBlock {
		return nil, fmt.Errorf("README.md: code block opened at line %d is never closed", start-1)
	}
	if skipNext != "" {
		return nil, fmt.Errorf("README.md:%d: the %s is not followed by a code block", skipAt, SkipMarker)
	}
	return out, sc.Err()
}

var (
	envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
	exitsNote = regexp.MustCompile(`^#\s*exits (\d+)\b`)
)

// Parse turns a shell line into a Command. It understands what the README uses: leading
// NAME=value assignments, single and double quotes, a trailing comment ("# exits N" sets the
// expected exit code), and "> FILE". Anything else (pipes, &&, $VAR, subshells) is an error: the
// block must then follow a SkipMarker.
func Parse(l Line) (Command, error) {
	c := Command{Line: l}
	words, comment, err := split(l.Text)
	if err != nil {
		return c, err
	}
	if m := exitsNote.FindStringSubmatch(comment); m != nil {
		c.WantCode, _ = strconv.Atoi(m[1])
	}
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		c.Env, words = append(c.Env, words[0]), words[1:]
	}
	if len(words) == 0 || words[0] != "flatcar-capo" {
		return c, fmt.Errorf("not a flatcar-capo command")
	}
	words = words[1:]
	for i := 0; i < len(words); i++ {
		if words[i] == ">" {
			if i != len(words)-2 {
				return c, fmt.Errorf("only a final \"> FILE\" redirection is understood")
			}
			c.Stdout, words = words[i+1], words[:i]
			break
		}
	}
	c.Args = words
	return c, nil
}

// split is a small POSIX-like word splitter; it returns the words and a trailing comment.
func split(s string) (words []string, comment string, err error) {
	var (
		cur    strings.Builder
		inWord bool
	)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			return words, strings.TrimSpace(s[i:]), nil
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, "", fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, "", fmt.Errorf("unterminated double quote")
			}
			inner := s[i+1 : i+1+j]
			if strings.ContainsAny(inner, "$`\\") {
				return nil, "", fmt.Errorf("expansions inside double quotes are not understood")
			}
			cur.WriteString(inner)
			inWord, i = true, i+1+j
		case strings.IndexByte("|&;<()$`\\*?", ch) >= 0:
			return nil, "", fmt.Errorf("shell syntax %q is not understood", ch)
		case ch == '>':
			flush()
			words = append(words, ">")
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return words, "", nil
}

var inlineCode = regexp.MustCompile("`(flatcar-capo [^`]+)`")

// inlineCommands returns the `flatcar-capo ...` spans of the README's prose and tables (outside
// code blocks): command synopses, whose subcommands and flags must exist even though they are
// not runnable as written.
func inlineCommands(r io.Reader) ([]Line, error) {
	var out []Line
	err := eachProseLine(r, func(n int, text string) {
		for _, m := range inlineCode.FindAllStringSubmatch(text, -1) {
			out = append(out, Line{Number: n, Text: m[1]})
		}
	})
	return out, err
}

// eachProseLine calls fn with every line of r outside fenced code blocks, numbered from 1.
func eachProseLine(r io.Reader, fn func(n int, text string)) error {
	inBlock, n := false, 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		n++
		text := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			fn(n, text)
		}
	}
	return sc.Err()
}

var longFlag = regexp.MustCompile(`(^|[\s\[|\\])(--[a-z][a-z0-9-]*)`)

// synopsis splits a command synopsis into its leading words (the candidate subcommand path) and
// the long flags it names anywhere.
func synopsis(text string) (words, flags []string) {
	for _, w := range strings.Fields(strings.TrimPrefix(text, "flatcar-capo ")) {
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(w) {
			break
		}
		words = append(words, w)
	}
	seen := map[string]bool{}
	for _, m := range longFlag.FindAllStringSubmatch(text, -1) {
		if !seen[m[2]] {
			seen[m[2]] = true
			flags = append(flags, m[2])
		}
	}
	return words, flags
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// inlineFlags returns the long flags named in the inline code of r's prose and tables (outside code
// blocks), each with the first line that names it.
func inlineFlags(r io.Reader) (map[string]int, error) {
	out := map[string]int{}
	err := eachProseLine(r, func(n int, text string) {
		for _, span := range codeSpan.FindAllStringSubmatch(text, -1) {
			for _, m := range longFlag.FindAllStringSubmatch(span[1], -1) {
				if _, ok := out[m[2]]; !ok {
					out[m[2]] = n
				}
			}
		}
	})
	return out, err
}
