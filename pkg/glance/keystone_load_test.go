package glance_test

import (
	"strings"
	"sync"
	"testing"
)

// Wrong passwords in parallel with right ones all get Keystone's 401, never a dropped
// connection: each wrong password makes keystone write failed_auth_count (and the next right one
// resets it) in its sqlite database, and with two uwsgi workers the second writer failed
// "database is locked" and keystone closed the connection unanswered (the client saw EOF; ~10%
// of 40 parallel wrong logins). scripts/openstack.sh runs one worker since.
func TestWrongPasswordsInParallelGet401(t *testing.T) {
	needOpenStack(t)
	img := rawImage(t, t.TempDir(), 9, 1<<20)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			cloud := "local-badpass"
			if i%3 == 0 {
				cloud = "local" // a right password after wrong ones: keystone resets the count (another write)
			}
			r := upload(t, nil, img, "--cloud", cloud, "--name", uniqueName(t))
			if strings.Contains(r.Combined(), "EOF") || strings.Contains(r.Combined(), "unreachable") {
				t.Errorf("--cloud %s: Keystone dropped the connection:\n%s", cloud, r.Combined())
			} else if cloud == "local-badpass" && !strings.Contains(r.Combined(), "HTTP 401") {
				t.Errorf("--cloud %s: want Keystone's 401:\n%s", cloud, r.Combined())
			} else if cloud == "local" && r.Code != 0 {
				t.Errorf("--cloud %s: exit %d:\n%s", cloud, r.Code, r.Combined())
			}
		})
	}
	wg.Wait()
}
