package glance_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// stack is the Keystone + Glance that scripts/openstack.sh started for this test binary.
var stack struct {
	mu       sync.Mutex
	startErr error
	stop     func()
	dir      string
	env      map[string]string
	password string
}

// TestMain runs the tests; the first test that needs the real OpenStack starts it (tests against
// the in-process fake and usage errors run without it), and it is always stopped: on return, on
// SIGINT/SIGTERM, and (through the script's --owner watchdog) when this process dies by a panic
// or SIGKILL.
func TestMain(m *testing.M) {
	os.Exit(runWithOpenStack(m))
}

func runWithOpenStack(m *testing.M) int {
	code := m.Run()
	stack.mu.Lock() // waits for a start still under way
	defer stack.mu.Unlock()
	if stack.dir != "" {
		if code != 0 {
			dumpLogs(stack.dir)
		}
		stack.stop()
	}
	return code
}

// startOpenStack brings Keystone + Glance up once per test binary.
func startOpenStack() error {
	stack.mu.Lock()
	defer stack.mu.Unlock()
	if stack.dir != "" || stack.startErr != nil {
		return stack.startErr
	}
	dir, err := os.MkdirTemp("", "flatcar-capo-openstack-")
	if err != nil {
		stack.startErr = err
		return err
	}
	stack.stop = func() {
		(&testutil.OpenStack{Dir: dir}).Down()
		os.RemoveAll(dir)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		stack.stop()
		os.Exit(130)
	}()
	s, err := testutil.OpenStackUp(context.Background(), dir)
	if err != nil {
		dumpLogs(dir)
		stack.stop()
		stack.startErr = err
		return stack.startErr
	}
	fmt.Fprintf(os.Stderr, "Keystone + Glance up in %.1f s in %s\n", s.Took.Seconds(), dir)
	stack.dir = dir
	stack.env = readEnvFile(filepath.Join(dir, "env"))
	stack.password = readOpenrc(filepath.Join(dir, "openrc"))["OS_PASSWORD"]
	// The tests' own API checks use the same clouds.yaml as the command under test.
	os.Setenv("OS_CLIENT_CONFIG_FILE", stack.env["OS_CLIENT_CONFIG_FILE"])
	return nil
}

func dumpLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(os.Stderr, "==== %s (tail)\n%s\n", l, data)
	}
}

func readEnvFile(path string) map[string]string {
	env := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return env
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "="); ok {
			env[k] = v
		}
	}
	return env
}

func readOpenrc(path string) map[string]string { return readEnvFile(path) }

// needOpenStack skips visibly when the packages are missing (fails in strict mode).
func needOpenStack(t *testing.T) {
	t.Helper()
	testutil.RequireTools(t, testutil.OpenStackTools...) // a unit run skips here, before the start
	if err := startOpenStack(); err != nil {
		t.Fatal(err)
	}
}

// upload runs the real binary with the test clouds.yaml and extra environment.
func upload(t *testing.T, env []string, args ...string) testutil.Result {
	t.Helper()
	env = append([]string{"OS_CLIENT_CONFIG_FILE=" + stack.env["OS_CLIENT_CONFIG_FILE"]}, env...)
	r := testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"upload"}, args...), Env: env})
	assertNoSecrets(t, r)
	return r
}

// assertNoSecrets fails when a password (right or wrong) shows up in the output.
func assertNoSecrets(t *testing.T, r testutil.Result) {
	t.Helper()
	if stack.password != "" && strings.Contains(r.Combined(), stack.password) {
		t.Fatalf("the password appears in the output:\n%s", r.Combined())
	}
}

var (
	connMu sync.Mutex
	conns  = map[string]*glance.Cloud{}
)

// connect returns the tests' own client of a cloud, authenticated once per test binary.
func connect(t *testing.T, cloud string) *glance.Cloud {
	t.Helper()
	connMu.Lock()
	defer connMu.Unlock()
	if c := conns[cloud]; c != nil {
		return c
	}
	c, err := glance.Connect(context.Background(), cloud)
	if err != nil {
		t.Fatalf("connecting to %s: %v", cloud, err)
	}
	conns[cloud] = c
	return c
}

// imagesNamed lists every image of that name in the cloud, whatever its status.
func imagesNamed(t *testing.T, cloud, name string) []images.Image {
	t.Helper()
	c := connect(t, cloud)
	pages, err := images.List(c.Image, images.ListOpts{Name: name}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	all, err := images.ExtractImages(pages)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// assertOnlyActive fails when an image of that name is anything but active (queued, killed, ...),
// and returns the active ones.
func assertOnlyActive(t *testing.T, cloud, name string, want int) []images.Image {
	t.Helper()
	imgs := imagesNamed(t, cloud, name)
	for _, img := range imgs {
		if img.Status != images.ImageStatusActive {
			t.Fatalf("image %s named %q is %s: a half-made image was left behind", img.ID, name, img.Status)
		}
	}
	if len(imgs) != want {
		t.Fatalf("%d images named %q in %s, want %d", len(imgs), name, cloud, want)
	}
	return imgs
}

// uniqueName keeps tests independent on the shared Glance.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("fc-%s-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), time.Now().UnixNano()%1e6)
}
