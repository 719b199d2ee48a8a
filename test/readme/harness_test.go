package readme_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/test/readme"
)

const sample = "Intro\n\n<!-- readme-test: skip (it is the demo) -->\n```sh\n" +
	"make demo\n" +
	"```\n\n```sh\n" +
	"# a comment line\n" +
	"flatcar-capo inspect x.img --for openstack   # exits 1: NOT READY\n" +
	"flatcar-capo build --method sysext \\\n    --release-server https://mirror.example/flatcar/{channel}\n" +
	"FLATCAR_CAPO_OUTPUT=json flatcar-capo manifests --set 'A=b c' > out.yaml\n" +
	"clusterctl generate cluster x --from out.yaml\n" +
	"flatcar-capo lint out.yaml | jq .\n" +
	"```\n\n<!-- readme-test: skip (CI) -->\n\n```yaml\nrun: flatcar-capo build\n```\n\n```yaml\nrun: flatcar-capo build\n```\n"

// The extraction gives a marked block's lines its reason, joins continuations, reads "# exits N",
// env assignments, quotes and "> FILE", and refuses what it cannot run.
func TestExtraction(t *testing.T) {
	lines, err := readme.Lines(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 8 {
		t.Fatalf("got %d lines, want 8: %+v", len(lines), lines)
	}
	if lines[0].Skip != "it is the demo" {
		t.Errorf("make demo: skip %q", lines[0].Skip)
	}
	for _, l := range lines[1:6] {
		if l.Skip != "" {
			t.Errorf("README.md:%d: skipped (%q), but its block has no marker", l.Number, l.Skip)
		}
	}
	c, err := readme.Parse(lines[1])
	if err != nil || c.WantCode != 1 || strings.Join(c.Args, " ") != "inspect x.img --for openstack" {
		t.Errorf("inspect line: %+v, %v", c, err)
	}
	c, err = readme.Parse(lines[2])
	if err != nil || lines[2].Number != 11 || strings.Join(c.Args, " ") != "build --method sysext --release-server https://mirror.example/flatcar/{channel}" {
		t.Errorf("continued line: %+v, %v", c, err)
	}
	c, err = readme.Parse(lines[3])
	if err != nil || c.Stdout != "out.yaml" || len(c.Env) != 1 || c.Args[len(c.Args)-1] != "A=b c" {
		t.Errorf("env/quote/redirect line: %+v, %v", c, err)
	}
	for _, i := range []int{4, 5} {
		if _, err := readme.Parse(lines[i]); err == nil {
			t.Errorf("%q: parsed, want an error (the test cannot run it)", lines[i].Text)
		}
	}
	if lines[6].Lang != "yaml" || lines[6].Skip != "CI" || lines[7].Skip != "" {
		t.Errorf("yaml blocks: %+v %+v", lines[6], lines[7])
	}
}

// A marker a reader would see, a marker without a reason and one that no block follows are
// errors, so no README line is skipped by accident or shows the test's bookkeeping.
func TestMarkerMistakes(t *testing.T) {
	for name, text := range map[string]string{
		"visible comment":  "```sh\nmake demo   # not run by the README test: demo\n```\n",
		"no reason":        "<!-- readme-test: skip -->\n```sh\nmake demo\n```\n",
		"empty reason":     "<!-- readme-test: skip () -->\n```sh\nmake demo\n```\n",
		"prose after it":   "<!-- readme-test: skip (demo) -->\nSome prose.\n```sh\nmake demo\n```\n",
		"nothing after it": "```sh\nflatcar-capo version\n```\n<!-- readme-test: skip (demo) -->\n",
	} {
		if lines, err := readme.Lines(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error, lines %+v", name, lines)
		}
	}
}

// A README example with a renamed flag (or a wrong exit code promise) is a failure of check,
// without any stand-in server: the binary's usage error is enough.
func TestWrongExampleIsCaught(t *testing.T) {
	w := &world{dir: t.TempDir()}
	for text, want := range map[string]string{
		"flatcar-capo oem set flatcar.img --identity openstack":        "exit code 2, the README says 0",
		"flatcar-capo manifests --flavour baked":                       "exit code 2, the README says 0",
		"flatcar-capo sysext inspekt x.raw":                            "exit code 2, the README says 0",
		"flatcar-capo version   # exits 1":                             "exit code 0, the README says 1",
		"flatcar-capo fetch --release-server https://mirror.example/x": "no local server",
	} {
		c, err := readme.Parse(readme.Line{Number: 1, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		err = w.check(t, c)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", text, err, want)
		}
	}
}
