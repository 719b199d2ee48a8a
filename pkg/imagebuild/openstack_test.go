package imagebuild_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// One Keystone + Glance on 127.0.0.1 for every test of this package that uploads (starting one
// costs ~17 s of CPU): the first test that asks starts it, TestMain stops it, and the script's
// --owner watchdog stops it if this process dies. The tests' image names differ, so they do not
// see each other's images.
var stack struct {
	once sync.Once
	dir  string
	s    *testutil.OpenStack
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if stack.s != nil {
		if err := stack.s.Down(); err != nil && code == 0 {
			os.Stderr.WriteString(err.Error() + "\n")
			code = 1
		}
	}
	if stack.dir != "" {
		os.RemoveAll(stack.dir)
	}
	os.Exit(code)
}

// sharedOpenStack returns the package's Keystone + Glance's clouds.yaml, starting it on first use.
func sharedOpenStack(t *testing.T) string {
	t.Helper()
	testutil.RequireTools(t, testutil.OpenStackTools...)
	stack.once.Do(func() {
		if stack.dir, stack.err = os.MkdirTemp("", "flatcar-capo-build-openstack-"); stack.err != nil {
			return
		}
		stack.s, stack.err = testutil.OpenStackUp(context.Background(), stack.dir)
	})
	if stack.err != nil {
		t.Fatal(stack.err)
	}
	t.Logf("Keystone + Glance (shared by this package's tests) came up in %.1f s", stack.s.Took.Seconds())
	return stack.s.CloudsYAML
}
