package standin

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestOpenStackMetadataService boots the openstack guest with no config drive: Ignition fetches
// its config from the metadata service at 169.254.169.254 in the initramfs, and coreos-metadata
// reads afterburn's keys from the service's EC2-style tree (a 404 leaves a key out).
func TestOpenStackMetadataService(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "busybox")
	img := CopyImage(t, Image(t, Options{OEM: "openstack"}))
	ign, key := TestUser(t)
	files := map[string]string{
		"/openstack/latest/user_data":   string(ign),
		"/latest/meta-data/hostname":    "standin-meta.novalocal",
		"/latest/meta-data/instance-id": "i-00000abc",
		"/latest/meta-data/local-ipv4":  "169.254.169.15",
		// afterburn's network provider reads the instance's UUID (CAPO's providerID) here.
		"/openstack/2012-08-10/meta_data.json": `{"uuid": "0d9c4b8e-46f1-4c2a-9a8e-2f1d3c4b5a69", "hostname": "standin-meta.novalocal"}`,
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if body, ok := files[r.URL.Path]; ok {
			w.Write([]byte(body))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	g := Boot(t, img, BootOptions{MetadataService: strings.TrimPrefix(srv.URL, "http://"), Key: key})
	// Logged in with the key from the service's user_data: Ignition read it there.
	wantContains(t, "id", must(t, g, "id"), "("+TestUserName+")", "(sudo)")
	wantContains(t, "/run/ignition.log", must(t, g, "cat /run/ignition.log"), "GET http://169.254.169.254/openstack/latest/user_data", ignitionParsed(ign))
	must(t, g, "sudo systemctl start coreos-metadata.service")
	if got, want := must(t, g, "sort /run/metadata/flatcar"), "COREOS_OPENSTACK_HOSTNAME=standin-meta.novalocal\n"+
		"COREOS_OPENSTACK_INSTANCE_ID=i-00000abc\nCOREOS_OPENSTACK_INSTANCE_UUID=0d9c4b8e-46f1-4c2a-9a8e-2f1d3c4b5a69\n"+
		"COREOS_OPENSTACK_IPV4_LOCAL=169.254.169.15"; got != want {
		t.Errorf("/run/metadata/flatcar:\n%s\nwant:\n%s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range []string{"GET /openstack/latest/user_data", "GET /latest/meta-data/instance-type", "GET /latest/meta-data/public-ipv4"} {
		if !slices.Contains(seen, p) {
			t.Errorf("the metadata service did not see %s (saw %q)", p, seen)
		}
	}
}
