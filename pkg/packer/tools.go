package packer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Errors the CLI can tell apart; the messages they wrap say how to fix the problem.
var (
	ErrMissingPacker = errors.New("packer is missing or unusable")
	ErrMissingPlugin = errors.New("the packer QEMU plugin is not installed")
	errMissingQEMU   = errors.New("QEMU is missing or unusable")
)

const (
	installPackerHint = "install it with `apt-get install packer` (Debian's 1.6.6), or run scripts/install-packer.sh " +
		"(builds packer 1.12.0 with the QEMU plugin into ~/.cache/flatcar-capo/packer/1.12.0/) and pass its path with --packer"
	installQEMUHint  = "install it with `apt-get install qemu-system-x86 qemu-utils`, or pass --qemu-binary"
	qemuPluginSource = "github.com/hashicorp/qemu"
)

// findPacker resolves the packer executable: the given path, else packer on PATH.
func findPacker(p string) (string, error) {
	if p == "" {
		found, err := exec.LookPath("packer")
		if err != nil {
			return "", fmt.Errorf("%w: packer is not on PATH: %s", ErrMissingPacker, installPackerHint)
		}
		p = found
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrMissingPacker, p, err)
	}
	st, err := os.Stat(abs)
	if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file: %s", ErrMissingPacker, abs, installPackerHint)
	}
	return abs, nil
}

// pluginPathEnv is the PACKER_PLUGIN_PATH to run packer with: the caller's, else the `plugins`
// directory next to the (symlink-resolved) packer binary when there is one, which is where
// scripts/install-packer.sh installs the QEMU plugin. "" means packer's default.
func pluginPathEnv(packer string) string {
	if v := os.Getenv("PACKER_PLUGIN_PATH"); v != "" {
		return v
	}
	real, err := filepath.EvalSymlinks(packer)
	if err != nil {
		real = packer
	}
	dir := filepath.Join(filepath.Dir(real), "plugins")
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return dir
	}
	return ""
}

// packerVersion runs `packer version`.
func packerVersion(ctx context.Context, d Driver, env []string) (version, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out strings.Builder
	err := d.Run(ctx, Invocation{Args: []string{"version"}, Env: env, Stdout: func(l string) { out.WriteString(l + "\n") }})
	if err != nil {
		return version{}, fmt.Errorf("%w: `%s version` failed: %v; %s", ErrMissingPacker, d.Path(), err, installPackerHint)
	}
	v, err := parseVersion(out.String())
	if err != nil {
		return version{}, fmt.Errorf("%w: %s: %v", ErrMissingPacker, d.Path(), err)
	}
	return v, nil
}

// checkQEMUPlugin fails, before anything boots, when packer >= 1.10 has no QEMU plugin, and says
// the exact command that installs it.
func checkQEMUPlugin(ctx context.Context, d Driver, v version, env []string, pluginPath string) error {
	if !v.NeedsQEMUPlugin() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out strings.Builder
	err := d.Run(ctx, Invocation{Args: []string{"plugins", "installed"}, Env: env, Stdout: func(l string) { out.WriteString(l + "\n") }})
	if err == nil && strings.Contains(out.String(), qemuPluginSource+"/packer-plugin-qemu") {
		return nil
	}
	cmd := d.Path() + " plugins install " + qemuPluginSource
	if pluginPath != "" {
		cmd = "PACKER_PLUGIN_PATH=" + pluginPath + " " + cmd
	}
	why := "it lists no " + qemuPluginSource + " plugin"
	if err != nil {
		why = "`packer plugins installed` failed: " + err.Error()
	}
	return fmt.Errorf("%w: packer %s (%s) has no QEMU builder of its own and %s; install the plugin with:\n  %s\n"+
		"(without internet: scripts/install-packer.sh builds packer 1.12.0 and the plugin from the Go module proxy)",
		ErrMissingPlugin, v, d.Path(), why, cmd)
}

// findQEMU resolves the QEMU system emulator, and checks qemu-img, which packer uses to copy the
// base disk.
func findQEMU(p string) (string, error) {
	p = cmp.Or(p, "qemu-system-x86_64")
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found: %s", errMissingQEMU, p, installQEMUHint)
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return "", fmt.Errorf("%w: qemu-img not found (packer copies the base disk with it): install it with `apt-get install qemu-utils`", errMissingQEMU)
	}
	return filepath.Abs(found) // clean, as Abs makes it
}
