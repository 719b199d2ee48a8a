package standin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

// builtinDir is where Flatcar keeps its built-in sysexts (relative to /usr, USR-A's root).
const builtinDir = "share/flatcar"

// usrName is USR-A's filesystem in the cache directory: usr.ext4, or with built-in sysexts
// usr-HASH.ext4, HASH over their names and contents.
func (o Options) usrName() (string, error) {
	if len(o.Sysexts) == 0 {
		return "usr.ext4", nil
	}
	h := sha256.New()
	for _, p := range o.Sysexts {
		name, err := sysextName(p)
		if err != nil {
			return "", err
		}
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("standin: built-in sysext: %w", err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return "usr-" + hex.EncodeToString(h.Sum(nil))[:12] + ".ext4", nil
}

func sysextName(p string) (string, error) {
	name := filepath.Base(p)
	if !strings.HasSuffix(name, ".raw") || strings.ContainsAny(name, " \"\\") {
		return "", fmt.Errorf("standin: built-in sysext %s: want a NAME.raw file (systemd-sysext's name)", p)
	}
	return name, nil
}

// addSysexts makes out, the variant of USR-A's filesystem base with opts.Sysexts built in,
// unless it exists (or there are none): a sparse copy of base written by debugfs (no mount, no
// rebuild of the Debian root), checked by e2fsck and read back before the rename.
func addSysexts(ctx context.Context, base, out string, opts Options) error {
	if len(opts.Sysexts) == 0 {
		return nil
	}
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	start := time.Now()
	tmp := out + ".tmp"
	defer os.Remove(tmp)
	if err := flatcardisk.CopySparse(base, tmp); err != nil {
		return err
	}
	var script strings.Builder
	for _, p := range opts.Sysexts {
		name, _ := sysextName(p)
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		file := "/" + builtinDir + "/" + name
		fmt.Fprintf(&script, "write %q %s\nsif %s mode 0100644\nsif %s uid 0\nsif %s gid 0\n", abs, file, file, file, file)
		// Flatcar's image links it from /etc/extensions, which the stand-in keeps in /usr/share/flatcar/etc.
		fmt.Fprintf(&script, "symlink /%s/etc/extensions/%s /usr%s\n", builtinDir, name, file)
	}
	cmd := exec.CommandContext(ctx, "debugfs", "-w", "-f", "-", tmp)
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME="+sourceDateEpoch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("standin: debugfs adding the built-in sysexts: %w\n%s", err, b)
	}
	// debugfs exits 0 whatever its commands did: check the result.
	if b, err := exec.CommandContext(ctx, "e2fsck", "-fn", tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("standin: e2fsck of USR-A with the built-in sysexts: %w\n%s", err, b)
	}
	for _, p := range opts.Sysexts {
		name, _ := sysextName(p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		file := "/" + builtinDir + "/" + name
		if got := debugfsStat(ctx, tmp, file); !strings.Contains(got, "Size: "+strconv.FormatInt(st.Size(), 10)+"\n") || !strings.Contains(got, "Mode:  0644") {
			return fmt.Errorf("standin: %s in USR-A after debugfs write:\n%s", file, got)
		}
		if got := debugfsStat(ctx, tmp, "/"+builtinDir+"/etc/extensions/"+name); !strings.Contains(got, "Type: symlink") || !strings.Contains(got, "/usr"+file) {
			return fmt.Errorf("standin: the /etc/extensions/%s link in USR-A after debugfs symlink:\n%s", name, got)
		}
	}
	if err := os.Chmod(tmp, 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	opts.logf("standin: USR-A with built-in sysexts %s made in %s", out, time.Since(start).Round(time.Millisecond))
	return nil
}

func debugfsStat(ctx context.Context, fsImage, path string) string {
	b, _ := exec.CommandContext(ctx, "debugfs", "-R", "stat "+path, fsImage).CombinedOutput()
	return string(b)
}
