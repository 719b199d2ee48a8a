package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// OpenStackTools are what scripts/openstack.sh needs (Debian's keystone, glance and barbican-api packages).
var OpenStackTools = []string{"uwsgi", "keystone-manage", "glance-manage", "glance-api", "barbican-wsgi-api"}

// OpenStack is a real Keystone + Glance on 127.0.0.1, started by scripts/openstack.sh: the one
// way every test package starts it.
type OpenStack struct {
	Dir        string // the script's state: clouds.yaml, env, openrc and the services' logs
	CloudsYAML string // for OS_CLIENT_CONFIG_FILE: cloud "local" (and the script's others)
	Took       time.Duration
}

func openstackScript() string { return filepath.Join(RepoRoot(), "scripts", "openstack.sh") }

// OpenStackUp starts Keystone + Glance in dir (about a minute). Through the script's --owner
// watchdog they also stop when this process dies; Down stops them otherwise.
func OpenStackUp(ctx context.Context, dir string) (*OpenStack, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, openstackScript(), "up", dir, "--owner", fmt.Sprint(os.Getpid())).CombinedOutput()
	s := &OpenStack{Dir: dir, CloudsYAML: filepath.Join(dir, "clouds.yaml"), Took: time.Since(start)}
	if err != nil {
		s.Down()
		return nil, fmt.Errorf("starting Keystone + Glance: %v\n%s", err, out)
	}
	return s, nil
}

// Down stops Keystone + Glance.
func (s *OpenStack) Down() error {
	if out, err := exec.Command(openstackScript(), "down", s.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("stopping Keystone + Glance: %v\n%s", err, out)
	}
	return nil
}

// StartOpenStack starts Keystone + Glance in dir in the background for the test (skipping, or
// failing in strict mode, when the packages are missing) and stops them when it ends; wait
// returns them once up and fails the test if they did not start.
func StartOpenStack(t testing.TB, dir string) (wait func() *OpenStack) {
	t.Helper()
	RequireTools(t, OpenStackTools...)
	var (
		s    *OpenStack
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s, err = OpenStackUp(ctx, dir)
	}()
	t.Cleanup(func() {
		<-done
		if s != nil {
			if err := s.Down(); err != nil {
				t.Error(err)
			}
		}
	})
	return func() *OpenStack {
		t.Helper()
		<-done
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Keystone + Glance up in %.1f s", s.Took.Seconds())
		return s
	}
}

// StopGlance stops one of the Glances ("one" or "two"), as a cloud whose image service dies;
// StartGlance starts it again.
func (s *OpenStack) StopGlance(which string) error  { return s.run("stop-glance", which) }
func (s *OpenStack) StartGlance(which string) error { return s.run("start-glance", which) }

func (s *OpenStack) run(cmd, which string) error {
	if out, err := exec.Command(openstackScript(), cmd, s.Dir, which).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", cmd, err, out)
	}
	return nil
}
