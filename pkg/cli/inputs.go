package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// inputAnnotation marks a flag whose value names a file (or directory) the command reads; its
// value is the kind (a key of inputKinds). markInputs sets it from inputFlags on the whole tree,
// so the flag's own file stays as it is and every command gets the same check.
const inputAnnotation = "flatcar-capo/input"

// inputFlags: every flag, of any command, that names a file or directory to read, and its kind.
// TestEveryFileFlagRefusesNonFiles fails for a flag whose help speaks of a file, a directory,
// a PEM or a keyring and that is neither here nor in its list of flags that read nothing.
var inputFlags = map[string]string{
	"config":       "config",
	"protect":      "protect",
	"from-record":  "record",
	"keyring":      "keyring",
	"registry-ca":  "ca",
	"ca-file":      "ca",
	"images-file":  "images-file",
	"os-release":   "os-release",
	"sysext":       "sysext",
	"binaries":     "binaries",
	"base-image":   "image",
	"flatcar-sbom": "spdx",
	// signing (build/upload: PEM or cosign; sysext publish: OpenPGP) and its checks
	"sign-key":      "signing-key",
	"sign-cert":     "cert",
	"sysupdate-key": "public-key",
	"key":           "public-key",
}

// inputArgs: the commands whose positional arguments are files to read (image arguments are
// checked by disk.OpenFile where they are opened).
var inputArgs = map[string]string{
	"flatcar-capo lint":           "manifest",
	"flatcar-capo sysext inspect": "sysext-file",
}

var inputKinds = map[string]infile.Kind{
	"config": infile.Config, "protect": infile.Protect, "record": infile.Record, "keyring": infile.Keyring,
	"ca": infile.CA, "images-file": infile.ImagesFile, "os-release": infile.OSRelease, "sysext": infile.SysextRef,
	"sysext-file": infile.Sysext, "binaries": infile.Binaries, "manifest": infile.Manifest,
	"signing-key": infile.SigningKey, "public-key": infile.PublicKey, "cert": infile.Cert, "spdx": infile.SPDX,
}

// markInputs annotates the input flags of c and of every command under it.
func markInputs(c *cobra.Command) {
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if kind, ok := inputFlags[f.Name]; ok {
			c.Flags().SetAnnotation(f.Name, inputAnnotation, []string{kind})
		}
	})
	for _, sub := range c.Commands() {
		markInputs(sub)
	}
}

// checkInputs refuses, before the command does anything, an input flag or argument that names
// a FIFO, a device, a socket, a directory (or a file where a directory is asked for) or a file
// larger than its kind can be: exit 2, nothing read, nothing written. The reads themselves go
// through infile too (a path can change after this check).
func checkInputs(c *cobra.Command, args []string) error {
	var err error
	c.Flags().VisitAll(func(f *pflag.Flag) {
		kind := f.Annotations[inputAnnotation]
		if err != nil || !f.Changed || len(kind) == 0 {
			return
		}
		values := []string{f.Value.String()}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			values = s.GetSlice()
		}
		for _, v := range values {
			if err = checkInput("--"+f.Name, v, kind[0]); err != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if kind, ok := inputArgs[c.CommandPath()]; ok {
		for _, a := range args {
			if a == "-" { // standard input: bounded where it is read
				continue
			}
			if err := checkInput(c.Name()+" argument", a, kind); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkInput(what, value, kind string) error {
	if value == "" {
		return nil
	}
	if _, err := os.Stat(value); errors.Is(err, fs.ErrNotExist) {
		return nil // the command says so where it opens it, after its own earlier checks (exit 1)
	}
	if kind == "image" {
		if err := disk.CheckFile(value); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	k := inputKinds[kind]
	if k.URLOK && (strings.HasPrefix(value, "http://") || strings.HasPrefix(value, "https://")) {
		return nil
	}
	return infile.CheckPath(what, value, k)
}
