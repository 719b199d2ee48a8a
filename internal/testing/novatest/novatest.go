// Package novatest runs a real OpenStack compute cloud from Debian 12's packages (Zed) for tests:
// Keystone + Glance as scripts/openstack.sh starts them, plus RabbitMQ, Placement, Nova (api with
// the metadata API, conductor, scheduler, compute with libvirt and virt_type=qemu, i.e. TCG) and
// Neutron (ML2 with the Linux bridge agent: this kernel has no Open vSwitch; the DHCP, L3 and
// metadata agents), every daemon started here (PID 1 is not systemd), all of it inside a network
// namespace of its own (see netns.go) with generated configs and sqlite databases in one directory,
// each service's log in LogDir. Stop (or, when this process dies first, a watchdog) leaves no
// process, namespace, bridge or VM behind.
package novatest

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/netns"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

//go:embed down.sh
var downScript []byte

// Options say where the cloud keeps its state and logs.
type Options struct {
	Dir    string // state: configs, databases, images, instances (a fresh temp dir)
	LogDir string // one log per service (Dir/logs when empty)
	// OpenStackScript is scripts/openstack.sh, which starts Keystone + Glance.
	OpenStackScript string
	// ForceConfigDrive sets Nova's force_config_drive: every server gets a config drive.
	ForceConfigDrive bool
	// Log gets one line per stage with its time.
	Log func(format string, args ...any)
}

// Cloud is a running compute cloud.
type Cloud struct {
	Dir, LogDir string
	Netns       string // the namespace everything runs in
	CloudsYAML  string // OS_CLIENT_CONFIG_FILE, cloud "local" (admin)
	Timings     []Timing

	opts     Options
	keystone string
	password string // Keystone's admin password
	// keystonePort is Keystone's port, on the loopback and at externalGW (netns.go).
	keystonePort string
	mu           sync.Mutex
	procs        []*proc
	state        *os.File
	watchdog     *exec.Cmd
}

// Timing is one stage of the start and how long it took.
type Timing struct {
	Stage string
	Took  time.Duration
}

func (c *Cloud) logf(format string, args ...any) {
	if c.opts.Log != nil {
		c.opts.Log(format, args...)
	}
}

func (c *Cloud) timed(stage string, start time.Time) {
	d := time.Since(start)
	c.mu.Lock()
	c.Timings = append(c.Timings, Timing{stage, d})
	c.mu.Unlock()
	c.logf("novatest: %s up in %.1f s", stage, d.Seconds())
}

// record appends a line to Dir/state, what down.sh reads to stop everything.
func (c *Cloud) record(kind, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.state, "%s %s\n", kind, value)
}

// start brings the cloud up (a few minutes on 2 cores). On error everything started is stopped.
func start(ctx context.Context, opts Options) (*Cloud, error) {
	if opts.LogDir == "" {
		opts.LogDir = filepath.Join(opts.Dir, "logs")
	}
	c := &Cloud{Dir: opts.Dir, LogDir: opts.LogDir, opts: opts,
		Netns: fmt.Sprintf("fcapo-%d", os.Getpid())}
	for _, d := range []string{c.Dir, c.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "started"), nil, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "down.sh"), downScript, 0o700); err != nil {
		return nil, err
	}
	var err error
	if c.state, err = os.OpenFile(filepath.Join(c.Dir, "state"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	if err := c.startWatchdog(); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.up(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// startWatchdog runs down.sh once this process is gone and the cloud was not stopped (SIGKILL,
// a test binary's timeout panic): Pdeathsig alone misses what the daemons started themselves.
func (c *Cloud) startWatchdog() error {
	running := filepath.Join(c.Dir, "running")
	if err := os.WriteFile(running, nil, 0o600); err != nil {
		return err
	}
	script := fmt.Sprintf(`trap '' HUP INT TERM; while kill -0 %d 2>/dev/null && [ -e %q ]; do sleep 1; done; [ -e %q ] && exec %q %q`,
		os.Getpid(), running, running, filepath.Join(c.Dir, "down.sh"), c.Dir)
	c.watchdog = exec.Command("setsid", "bash", "-c", script)
	if err := c.watchdog.Start(); err != nil {
		return fmt.Errorf("starting the teardown watchdog: %w", err)
	}
	go c.watchdog.Wait()
	return nil
}

// Stop stops everything and removes the namespace; it may be called more than once.
func (c *Cloud) Stop() error {
	start := time.Now()
	c.recordAgentNetns()
	c.stopProcs(10 * time.Second)
	out, err := exec.Command(filepath.Join(c.Dir, "down.sh"), c.Dir).CombinedOutput()
	if c.state != nil {
		c.state.Close()
	}
	c.logf("novatest: stopped in %.1f s", time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("novatest: down.sh: %v: %s", err, out)
	}
	return nil
}

// Leftovers lists what Stop should have removed and did not: processes naming Dir, the namespace.
func (c *Cloud) Leftovers() []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), c.Dir) {
			left = append(left, "process "+e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if _, err := os.Stat("/run/netns/" + c.Netns); err == nil {
		left = append(left, "network namespace "+c.Netns)
	}
	return left
}

// HTTPClient reaches the APIs on the namespace's loopback.
func (c *Cloud) HTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(ctx, c.Netns, network, addr)
		},
		DisableKeepAlives: true,
	}}
}

// Command is argv run in the namespace with the admin's cloud selected (the openstack CLI,
// virsh, ip).
func (c *Cloud) Command(ctx context.Context, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.Netns}, argv...)...)
	cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+c.CloudsYAML, "OS_CLOUD=local")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// OpenStack runs the openstack CLI in the namespace and returns its standard output.
func (c *Cloud) OpenStack(ctx context.Context, args ...string) ([]byte, error) {
	cmd := c.Command(ctx, append([]string{"openstack"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("openstack %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// readEnv reads KEY=VALUE lines (scripts/openstack.sh's env and the export lines of its openrc).
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(s.Text(), "export "), "=")
		if ok {
			m[k] = v
		}
	}
	return m, s.Err()
}

// StartT starts a cloud for test t with scripts/openstack.sh of this repository; t's cleanup stops
// it and fails t if anything of it is left behind.
func StartT(ctx context.Context, t testing.TB, opts Options) *Cloud {
	t.Helper()
	if opts.OpenStackScript == "" {
		opts.OpenStackScript = filepath.Join(testutil.RepoRoot(), "scripts", "openstack.sh")
	}
	cloud, err := start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cloud.Stop(); err != nil {
			t.Error(err)
		}
		if left := cloud.Leftovers(); len(left) > 0 {
			t.Errorf("left behind after Stop:\n%s", strings.Join(left, "\n"))
		}
	})
	return cloud
}
