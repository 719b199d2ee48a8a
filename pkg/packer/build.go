package packer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Tools are what a build runs: packer (path, version, plugin directory), QEMU and the
// accelerator. Probe finds them; a Config that carries them is not probed again.
type Tools struct {
	Packer          string `json:"packer"`
	PackerVersion   string `json:"packerVersion"`
	PluginPath      string `json:"packerPluginPath,omitempty"`
	QEMUBinary      string `json:"qemuBinary"`
	Accelerator     string `json:"accelerator"`
	AcceleratorNote string `json:"acceleratorNote,omitempty"`
	driver          Driver
	version         version
}

// PlanInfo is what a build would do, for --dry-run.
type PlanInfo struct {
	Tools
	Template string   `json:"template"`
	Env      []string `json:"env"`  // packer's environment (added to ours)
	Vars     []string `json:"vars"` // the provisioning scripts' environment
	Config   Config   `json:"-"`
}

// queryEnv is the environment of packer's queries: no PACKER_LOG_PATH, as the build directory
// need not exist yet.
func queryEnv(pluginPath string) []string {
	env := []string{"CHECKPOINT_DISABLE=1", "PACKER_LOG=", "PACKER_NO_COLOR=1"}
	if pluginPath != "" {
		env = append(env, "PACKER_PLUGIN_PATH="+pluginPath)
	}
	return env
}

// Probe resolves packer (path, version, QEMU plugin), QEMU and the accelerator from cfg's
// Packer, Driver, QEMUBinary and Accelerator. It boots nothing and writes nothing (the
// accelerator probe starts QEMU without a machine).
func Probe(ctx context.Context, cfg Config) (*Tools, error) {
	d := cfg.Driver
	if d == nil {
		p, err := findPacker(cfg.Packer)
		if err != nil {
			return nil, err
		}
		d = &ExecDriver{Packer: p}
	}
	t := &Tools{Packer: d.Path(), PluginPath: pluginPathEnv(d.Path()), driver: d}
	query := queryEnv(t.PluginPath)
	var err error
	if t.version, err = packerVersion(ctx, d, query); err != nil {
		return nil, err
	}
	t.PackerVersion = t.version.String()
	if err := t.version.Supported(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissingPacker, err)
	}
	if err := checkQEMUPlugin(ctx, d, t.version, query, t.PluginPath); err != nil {
		return nil, err
	}
	if t.QEMUBinary, err = findQEMU(cfg.QEMUBinary); err != nil {
		return nil, err
	}
	t.Accelerator, t.AcceleratorNote = chooseAccelerator(ctx, t.QEMUBinary, cfg.Accelerator)
	return t, nil
}

// Plan checks cfg, probes its tools unless cfg.Tools has them, and renders the template. It
// boots nothing and writes nothing.
func Plan(ctx context.Context, cfg Config) (PlanInfo, error) {
	cfg, err := cfg.check()
	if err != nil {
		return PlanInfo{}, err
	}
	t := cfg.Tools
	if t == nil {
		if t, err = Probe(ctx, cfg); err != nil {
			return PlanInfo{}, err
		}
	}
	pi := PlanInfo{Tools: *t}
	if cfg.Driver != nil {
		pi.driver = cfg.Driver // the caller's (its stop grace), for the packer the probe found
	}
	pi.Env = append(queryEnv(pi.PluginPath),
		"PACKER_LOG=1",
		"PACKER_LOG_PATH="+filepath.Join(cfg.WorkDir, "packer.log"),
		"PACKER_CACHE_DIR="+filepath.Join(cfg.WorkDir, "packer_cache"),
	)
	if pi.Template, err = render(cfg, pi.version, pi.Accelerator, pi.QEMUBinary); err != nil {
		return pi, err
	}
	pi.Vars = scriptEnv(cfg)
	pi.Config = cfg
	return pi, nil
}

func (pi PlanInfo) validate(ctx context.Context, c *condenser) error {
	cfg := pi.Config
	if err := prepareWorkDir(cfg.WorkDir); err != nil {
		return err
	}
	if err := os.WriteFile(pi.templatePath(), []byte(pi.Template), 0o600); err != nil {
		return err
	}
	if err := pi.run(ctx, c, "validate", pi.templatePath()); err != nil {
		return c.failure("packer validate of "+pi.templatePath(), err, pi.logFile())
	}
	return nil
}

func (pi PlanInfo) templatePath() string { return filepath.Join(pi.Config.WorkDir, templateFile) }
func (pi PlanInfo) logFile() string      { return filepath.Join(pi.Config.WorkDir, "packer.log") }

func (pi PlanInfo) run(ctx context.Context, c *condenser, args ...string) error {
	return pi.driver.Run(ctx, Invocation{Args: args, Env: pi.Env, Dir: pi.Config.WorkDir, Stdout: c.line})
}

// Build runs the Packer build of cfg: plan, materialise the build directory, `packer validate`,
// `packer build`. On failure or cancellation no QEMU process of the build is left and OutputDir
// is removed; the error names the packer log.
func Build(ctx context.Context, cfg Config) (res Result, err error) {
	pi, err := Plan(ctx, cfg)
	if err != nil {
		return res, err
	}
	cfg = pi.Config
	log := cmp.Or(cfg.Log, io.Discard)
	if pi.AcceleratorNote != "" {
		fmt.Fprintln(log, pi.AcceleratorNote)
	}
	res = Result{LogFile: pi.logFile(), PackerVersion: pi.PackerVersion, Accelerator: pi.Accelerator}
	defer func() {
		if err != nil {
			killQEMUUsing(cfg.OutputDir)
			os.RemoveAll(cfg.OutputDir)
		}
	}()
	// validate's own output (warnings, "The configuration is valid.") only matters when it fails.
	if err := pi.validate(ctx, &condenser{log: io.Discard}); err != nil {
		return res, err
	}
	c := &condenser{log: log}
	if err := pi.run(ctx, c, "build", "-machine-readable", "-color=false", "-on-error=cleanup", pi.templatePath()); err != nil {
		return res, c.failure("packer build", err, pi.logFile())
	}
	// The build user is removed by the shutdown command, whose outcome only the console shows.
	serial := filepath.Join(cfg.WorkDir, "serial.log")
	if b, _ := os.ReadFile(serial); bytes.Contains(b, []byte("flatcar-capo sysprep: ERROR")) {
		line, _, _ := bytes.Cut(b[bytes.Index(b, []byte("flatcar-capo sysprep: ERROR")):], []byte("\n"))
		return res, fmt.Errorf("the build VM reported at shutdown: %s (console log: %s)", bytes.TrimSpace(line), serial)
	}
	res.Image = filepath.Join(cfg.OutputDir, cfg.OutputName)
	if st, err := os.Stat(res.Image); err != nil || !st.Mode().IsRegular() {
		return res, fmt.Errorf("packer build finished but wrote no %s; full packer log: %s", res.Image, pi.logFile())
	}
	return res, nil
}

// condenser passes packer's ui lines on and keeps what a failure message needs: the first
// error packer reported (its later ones repeat it), or else the plain-text lines of a command
// without machine-readable output (`packer validate`).
type condenser struct {
	log        io.Writer
	firstError string
	plain      []string
}

func (c *condenser) line(s string) {
	l, ok := parseLine(s)
	if !ok {
		if t := strings.TrimSpace(s); t != "" {
			fmt.Fprintln(c.log, t)
			c.plain = append(c.plain, t)
			if len(c.plain) > 12 {
				c.plain = c.plain[1:]
			}
		}
		return
	}
	kind, text, ok := l.UI()
	if !ok {
		if l.Type == "error" && len(l.Data) > 0 && c.firstError == "" {
			c.firstError = strings.TrimSpace(l.Data[len(l.Data)-1])
		}
		return
	}
	var kept []string
	for _, t := range strings.Split(text, "\n") {
		if t = strings.TrimRight(t, " \r"); strings.TrimSpace(t) == "" {
			continue
		}
		fmt.Fprintln(c.log, t)
		kept = append(kept, strings.TrimSpace(t))
	}
	if kind == "error" && c.firstError == "" && len(kept) > 0 {
		c.firstError = strings.Join(kept, " ")
	}
}

func (c *condenser) failure(what string, err error, logFile string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s interrupted: %w (packer log: %s)", what, err, logFile)
	}
	msg := what + " failed"
	if detail := cmp.Or(c.firstError, strings.Join(c.plain, " ")); detail != "" {
		msg += ": " + detail
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%s (exit code %d); full packer log: %s", msg, ee.Code, logFile)
	}
	return fmt.Errorf("%s (%v); full packer log: %s", msg, err, logFile)
}
