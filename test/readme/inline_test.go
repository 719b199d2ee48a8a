package readme_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/test/readme"
)

// The command synopses in the README's prose and tables (`flatcar-capo oem set IMAGE --id ...`)
// cannot run as written, but their subcommands and every flag they name must exist: each is looked
// up in the binary's --help.
func TestREADMESynopses(t *testing.T) {
	spans, err := readme.InlineCommands(openREADME(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) < 10 {
		t.Fatalf("only %d inline flatcar-capo commands found: the extraction is broken", len(spans))
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
			t.Errorf("README.md:%d: `%s` names no subcommand", s.Number, s.Text)
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
			t.Errorf("README.md:%d: `%s`: %q is not a flatcar-capo command", s.Number, s.Text, words[0])
			continue
		}
		for _, fl := range flags {
			if !strings.Contains(h, fl+" ") && !strings.Contains(h, fl+"\n") {
				t.Errorf("README.md:%d: `%s`: flatcar-capo %s has no flag %s", s.Number, s.Text, strings.Join(words[:n], " "), fl)
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
