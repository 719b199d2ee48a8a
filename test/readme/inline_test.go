package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/test/readme"
)

// synopsisDocs are the pages whose inline command synopses are checked: the README and the pages
// its details moved to.
var synopsisDocs = []string{"README.md", "CONTRIBUTING.md", "docs/reference.md"}

// The command synopses in the README's prose and tables (`flatcar-capo oem set IMAGE --id ...`),
// and in the pages it links for detail, cannot run as written, but their subcommands and every flag
// they name must exist: each is looked up in the binary's --help.
func TestREADMESynopses(t *testing.T) {
	type span struct {
		doc string
		readme.Line
	}
	var spans []span
	for _, doc := range synopsisDocs {
		f, err := os.Open(filepath.Join(testutil.RepoRoot(), doc))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := readme.InlineCommands(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		for _, l := range lines {
			spans = append(spans, span{doc, l})
		}
	}
	if len(spans) < 10 {
		t.Fatalf("only %d inline flatcar-capo commands found in %v: the extraction is broken", len(spans), synopsisDocs)
	}
	helps := map[string]string{}
	help := func(path []string) (string, bool) {
		key := strings.Join(path, " ")
		if h, ok := helps[key]; ok {
			return h, h != ""
		}
		r := testutil.Run(t, append(append([]string{}, path...), "--help")...)
		h := ""
		if r.Code == 0 && strings.Contains(r.Stdout, "Usage:\n  flatcar-capo "+key) {
			h = r.Stdout
		}
		helps[key] = h
		return h, h != ""
	}
	checked := 0
	defer func() {
		t.Logf("%d synopses, %d flag mentions checked", len(spans), checked)
		if checked < 30 {
			t.Errorf("only %d flag mentions found in README synopses: the extraction is broken", checked)
		}
	}()
	for _, s := range spans {
		words, flags := readme.Synopsis(s.Text)
		checked += len(flags)
		if len(words) == 0 {
			t.Errorf("%s:%d: `%s` names no subcommand", s.doc, s.Number, s.Text)
			continue
		}
		// The longest prefix of words that is a command (oem set, sysext create, build, ...).
		var h string
		n := 0
		for i := len(words); i >= 1; i-- {
			if got, ok := help(words[:i]); ok {
				h, n = got, i
				break
			}
		}
		if n == 0 {
			t.Errorf("%s:%d: `%s`: %q is not a flatcar-capo command", s.doc, s.Number, s.Text, words[0])
			continue
		}
		for _, fl := range flags {
			if !strings.Contains(h, fl+" ") && !strings.Contains(h, fl+"\n") {
				t.Errorf("%s:%d: `%s`: flatcar-capo %s has no flag %s", s.doc, s.Number, s.Text, strings.Join(words[:n], " "), fl)
			}
		}
	}
}

func TestSynopsis(t *testing.T) {
	words, flags := readme.Synopsis(`flatcar-capo build [--method packer\|sysext] [--base qemu\|openstack\|--base-image F] [--cloud C]... --dry-run`)
	if strings.Join(words, " ") != "build" || strings.Join(flags, " ") != "--method --base --base-image --cloud --dry-run" {
		t.Errorf("got %q %q", words, flags)
	}
	words, _ = readme.Synopsis("flatcar-capo oem set IMAGE --id openstack")
	if strings.Join(words, " ") != "oem set" {
		t.Errorf("got %q", words)
	}
}

// Every flag the README names in its prose and tables (`--registry-mirror-only`, `--ca-file FILE`),
// with or without its command, must be a flag of some flatcar-capo command: a renamed or removed
// flag cannot stay in the README unseen.
func TestREADMEFlagsExist(t *testing.T) {
	flags, err := readme.InlineFlags(openREADME(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) < 20 {
		t.Fatalf("only %d flags found in the README's inline code: the extraction is broken", len(flags))
	}
	var helps strings.Builder
	var walk func(path []string)
	walk = func(path []string) {
		r := testutil.Run(t, append(append([]string{}, path...), "--help")...)
		if r.Code != 0 {
			t.Fatalf("flatcar-capo %s --help: exit %d\n%s", strings.Join(path, " "), r.Code, r.Stderr)
		}
		helps.WriteString(r.Stdout)
		_, cmds, ok := strings.Cut(r.Stdout, "\nAvailable Commands:\n")
		if !ok {
			return
		}
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		for _, l := range strings.Split(cmds, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
				walk(append(append([]string{}, path...), f[0]))
			}
		}
	}
	walk(nil)
	h := helps.String()
	for fl, line := range flags {
		if !strings.Contains(h, fl+" ") && !strings.Contains(h, fl+"\n") && !strings.Contains(h, fl+"=") {
			t.Errorf("README.md:%d: %s is no flag of any flatcar-capo command", line, fl)
		}
	}
	t.Logf("%d flags named in the README, all found", len(flags))
}
