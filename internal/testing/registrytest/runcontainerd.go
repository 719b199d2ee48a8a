package registrytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NodeFile is a file of the node's ROOT (path without a leading slash).
type NodeFile struct {
	Path    string
	Mode    os.FileMode
	Content []byte
}

// Containerd is a real containerd (2.1.5, or one of ContainerdMatrix) running on this host with Flatcar's config.toml and a node's
// /etc/containerd files (moved under its directory), to pull through the CRI as the node does.
type Containerd struct {
	Dir, Socket string
	Version     string
	bin         string
	cmd         *exec.Cmd
}

// startContainerd writes files (those under etc/containerd/, every absolute /etc/containerd path
// in them moved to the test's directory) and runs containerd with env (the node's proxy
// settings) until the test ends. The native snapshotter and no NRI keep it to this directory.
func startContainerd(t testing.TB, files []NodeFile, env []string) *Containerd {
	t.Helper()
	return StartContainerdOf(t, ContainerdVersion, files, env)
}

// StartContainerdOf is StartContainerd with containerd version (ContainerdDirOf).
func StartContainerdOf(t testing.TB, version string, files []NodeFile, env []string) *Containerd {
	t.Helper()
	bin := ContainerdDirOf(t, version)
	dir, err := os.MkdirTemp("", "ctrd-") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	etc := filepath.Join(dir, "etc/containerd")
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "etc/containerd/") {
			continue
		}
		p := filepath.Join(dir, f.Path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(f.Content), "/etc/containerd", etc)), f.Mode.Perm()); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(etc, "conf.d"), 0o755)
	// debug: the log shows every registry request containerd makes (Log).
	test := "version = 2\ndisabled_plugins = [\"io.containerd.nri.v1.nri\"]\n[debug]\n  level = \"debug\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"native\"\n"
	os.WriteFile(filepath.Join(etc, "conf.d", "99-test.toml"), []byte(test), 0o644)
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "c.sock"), Version: version, bin: bin}
	cfg := strings.NewReplacer(`root = "/var/lib/containerd"`, `root = "`+dir+`/root"`, `state = "/run/containerd"`, `state = "`+dir+`/state"`,
		`address = "/run/containerd/containerd.sock"`, `address = "`+c.Socket+`"`).Replace(FlatcarContainerdConfig(filepath.Join(etc, "conf.d")))
	cfgFile := filepath.Join(dir, "config.toml")
	os.WriteFile(cfgFile, []byte(cfg), 0o644)
	log, _ := os.Create(filepath.Join(dir, "containerd.log"))
	c.cmd = exec.Command(filepath.Join(bin, "containerd"), "--config", cfgFile)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait(); log.Close() })
	for i := 0; ; i++ {
		if exec.Command(filepath.Join(bin, "crictl"), "--runtime-endpoint", "unix://"+c.Socket, "--timeout", "2s", "version").Run() == nil {
			break
		}
		if i > 100 {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not answer on %s:\n%s", c.Socket, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return c
}

// Pull runs crictl pull ref through the CRI and returns its output and error.
func (c *Containerd) Pull(ref string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.bin, "crictl"), "--runtime-endpoint", "unix://"+c.Socket, "--timeout", "60s", "pull", ref).CombinedOutput()
	return string(out), err
}

// Bin is the directory of this containerd's binaries (ctr, crictl).
func (c *Containerd) Bin() string { return c.bin }

// Crictl runs crictl against this containerd and returns its standard output (with its
// standard error after it when it fails: crictl warns there about its missing config file).
func (c *Containerd) Crictl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "crictl"), append([]string{"--runtime-endpoint", "unix://" + c.Socket, "--timeout", "30s"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// Log is containerd's log so far.
func (c *Containerd) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	return string(b)
}
