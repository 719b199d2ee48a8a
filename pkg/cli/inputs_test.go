package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/cli"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// notInputs are the flags whose help speaks of a file or a directory but that read none: they
// name what is written, a cache, or a program to run.
var notInputs = map[string]string{
	"output-file":    "written (atomicfile)",
	"output-dir":     "written; plan only looks for records in it",
	"cache-dir":      "the download cache, made and locked by the command",
	"packer":         "a program to run",
	"qemu-binary":    "a program to run",
	"image-source":   "a URL",
	"url":            "a URL",
	"release-server": "a URL",
	"sysext-url":     "a URL",
	"image-sha512":   "a digest",
	"to":             "a format name",
	"disk-format":    "a format name",
	"arch":           "an architecture name",
	"name":           "a name",
}

// fileArgs is how a command's Use says its positional arguments are files.
var fileArgs = regexp.MustCompile(`^\S+ FILE\b`)

// fileish is how a flag's help says it names a file or a directory.
var fileish = regexp.MustCompile(`\bFILE\b|(?i)\bfile\b|\bdirectory\b|\bPEM\b|\bkeyring\b|\bbuild record\b|\bmanifest,`)

// baseArgs are what a command needs besides the flag under test for cobra to run it (positional
// arguments); ok.yaml and ok.raw are small regular files the test makes.
var baseArgs = map[string][]string{
	"flatcar-capo inspect":        {"ok.raw"},
	"flatcar-capo lint":           {"ok.yaml"},
	"flatcar-capo sysext inspect": {"ok.raw"},
	"flatcar-capo sysext publish": {"."},
	"flatcar-capo upload":         {"ok.raw"},
	"flatcar-capo verify":         {"ok.raw"},
}

type inputCase struct {
	cmd  string // command path
	flag string // "" for a positional argument
	kind string
}

// inputCases walks the whole command tree: every flag marked as naming an input, and every
// flag whose help says it names a file that is neither marked nor listed in notInputs (an error:
// a new flag cannot escape the check).
func inputCases(t *testing.T) []inputCase {
	var cases []inputCase
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if k := f.Annotations["flatcar-capo/input"]; len(k) > 0 {
				cases = append(cases, inputCase{c.CommandPath(), f.Name, k[0]})
			} else if _, ok := notInputs[f.Name]; !ok && fileish.MatchString(f.Usage) && f.Value.Type() != "bool" {
				t.Errorf("%s --%s speaks of a file (%q) but is not an input flag: add it to inputFlags in pkg/cli/inputs.go, or to notInputs here if it reads nothing",
					c.CommandPath(), f.Name, f.Usage)
			}
		})
		if fileArgs.MatchString(c.Use) {
			cases = append(cases, inputCase{c.CommandPath(), "", "argument"})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(cli.NewRootCommand())
	return cases
}

// Every file a flag or an argument names, on every command: a FIFO, /dev/zero, a directory (a
// regular file where a directory is asked for) and a file larger than its kind can be are
// refused before anything is read or written: exit 2 within seconds (a FIFO used to hang,
// /dev/zero to eat all memory), a message naming the flag and what the path is.
func TestEveryFileFlagRefusesNonFiles(t *testing.T) {
	cases := inputCases(t)
	if len(cases) < 12 {
		t.Fatalf("only %d input flags found in the command tree: the walk is broken", len(cases))
	}
	type bad struct {
		name string
		make func(t *testing.T, dir string) string
		want string
	}
	fifo := bad{"fifo", func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "in.fifo")
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}, "is a named pipe (FIFO)"}
	zero := bad{"/dev/zero", func(t *testing.T, dir string) string { return "/dev/zero" }, "is a character device"}
	directory := bad{"directory", func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "in.d")
		os.Mkdir(p, 0o755)
		return p
	}, "is a directory"}
	regular := bad{"regular file for a directory", func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "in.file")
		os.WriteFile(p, []byte("x"), 0o644)
		return p
	}, "is a regular file, not a"}
	oversized := func(max int64) bad {
		return bad{"oversized", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "in.big")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(max + 1) // sparse: costs no disk
			f.Close()
			return p
		}, "more than a"}
	}
	kinds := map[string]infile.Kind{"config": infile.Config, "protect": infile.Protect, "record": infile.Record,
		"keyring": infile.Keyring, "ca": infile.CA, "images-file": infile.ImagesFile, "os-release": infile.OSRelease,
		"sysext": infile.SysextRef, "binaries": infile.Binaries, "argument": infile.Manifest,
		"signing-key": infile.SigningKey, "public-key": infile.PublicKey, "cert": infile.Cert, "spdx": infile.SPDX}
	for _, c := range cases {
		var bads []bad
		switch k, known := kinds[c.kind]; {
		case c.kind == "image":
			bads = []bad{fifo, zero, directory}
		case !known:
			t.Errorf("%s --%s: kind %q unknown to this test", c.cmd, c.flag, c.kind)
			continue
		case k.Dir:
			bads = []bad{fifo, zero, regular}
		case k.FileOrDir:
			bads = []bad{fifo, zero, oversized(k.Max)}
		default:
			bads = []bad{fifo, zero, directory, oversized(k.Max)}
		}
		if c.cmd == "flatcar-capo sysext inspect" && c.flag == "" {
			bads = []bad{fifo, zero, directory, oversized(infile.Sysext.Max)}
		}
		for _, b := range bads {
			name := fmt.Sprintf("%s --%s/%s", strings.TrimPrefix(c.cmd, "flatcar-capo "), c.flag, b.name)
			if c.flag == "" {
				name = fmt.Sprintf("%s ARG/%s", strings.TrimPrefix(c.cmd, "flatcar-capo "), b.name)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644)
				os.WriteFile(filepath.Join(dir, "ok.raw"), []byte("not a sysext"), 0o644)
				in := b.make(t, dir)
				before, _ := os.ReadDir(dir)
				args := strings.Fields(strings.TrimPrefix(c.cmd, "flatcar-capo"))
				if c.flag == "" {
					args = append(args, in)
				} else {
					args = append(append(args, baseArgs[c.cmd]...), "--"+c.flag, in)
				}
				testutil.Binary(t) // built (once) before the clock starts
				start := time.Now()
				r := testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: dir, Timeout: 30 * time.Second,
					Env: []string{"HOME=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "OS_CLIENT_CONFIG_FILE=" + filepath.Join(dir, "none.yaml")}})
				took := time.Since(start)
				want := []string{in, b.want}
				if c.flag != "" {
					want = append(want, "--"+c.flag)
				}
				r.MustFail(t, 2, want...)
				// A hang is the 30 s Timeout (killed); this bound catches a slow read. Every subtest runs at once,
				// and each start links CAPI's types (~0.1 s CPU): on 2 loaded cores they queue.
				if took > 15*time.Second {
					t.Errorf("refused only after %v", took)
				}
				if after, _ := os.ReadDir(dir); len(after) != len(before) {
					t.Errorf("files written: before %v, after %v", before, after)
				}
			})
		}
	}
}

// The clouds.yaml that OS_CLIENT_CONFIG_FILE names goes through the same opener: /dev/zero
// used to be read without end, a FIFO to hang the command.
func TestCloudsYAMLFromEnvironmentRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "clouds.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.raw")
	writeRaw(t, img, 1<<20)
	for path, want := range map[string]string{"/dev/zero": "is a character device", fifo: "is a named pipe (FIFO)"} {
		testutil.Binary(t)
		start := time.Now()
		r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", img, "--name", "x", "--cloud", "c"},
			Timeout: 30 * time.Second, Env: []string{"OS_CLIENT_CONFIG_FILE=" + path}})
		r.MustFail(t, 2, "clouds.yaml "+path, want)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s refused only after %v", path, took)
		}
	}
}
