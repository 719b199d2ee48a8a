package novatest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// proofEnv opts in: the proof takes minutes and GBs, so make test does not run it (make capo-proof does).
const proofEnv = "FLATCAR_CAPO_CAPO_PROOF"

// The marker the user-data's unit writes to the console once the guest applied its config drive.
const userDataMarker = "CAPO-PROOF-USERDATA"

// TestComputeBootsServer is the first part of issue 46: a real Nova, Neutron and Placement from
// Debian's packages boot the stand-in guest from Glance on a Neutron network behind a router, with
// a config drive carrying user-data (an Ignition config); the server goes ACTIVE with an address,
// and its console log shows the guest applied that user-data (a unit it defines prints the marker,
// the addresses the guest got from Neutron's DHCP, and what it read from the metadata service
// through Neutron's metadata agent).
func TestComputeBootsServer(t *testing.T) {
	testutil.RequireOptIn(t, proofEnv, "the OpenStack compute proof (make capo-proof)")
	testutil.RequireOpenStackCompute(t)
	testutil.RequireTools(t, standin.Tools...)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	logDir := os.Getenv("CAPO_PROOF_DIR")
	if logDir == "" {
		logDir = t.TempDir()
	} else {
		logDir = filepath.Join(logDir, "logs")
	}
	// The image first (cached; built once as root): it must not count in the cloud's start.
	image, err := standin.BuildQcow2(ctx, standin.Options{OEM: "openstack", Log: t.Logf})
	if err != nil {
		t.Fatalf("standin: %v", err)
	}

	start := time.Now()
	cloud, err := novatest.Start(ctx, novatest.Options{Dir: t.TempDir(), LogDir: logDir,
		OpenStackScript: filepath.Join(testutil.RepoRoot(), "scripts", "openstack.sh"), Log: t.Logf})
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
	upTook := time.Since(start)
	rssIdle, _ := cloud.RSS()
	t.Logf("cloud up in %.0f s, %d MiB resident (idle)", upTook.Seconds(), rssIdle>>20)

	osc := func(args ...string) string {
		t.Helper()
		out, err := cloud.OpenStack(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	t0 := time.Now()
	imageID := osc("image", "create", "--disk-format", "qcow2", "--container-format", "bare",
		"--file", image, "--public", "-f", "value", "-c", "id", "flatcar-standin")
	t.Logf("image %s uploaded in %.1f s", imageID, time.Since(t0).Seconds())
	osc("flavor", "create", "--ram", "512", "--disk", "4", "--vcpus", "1", "proof.small")

	t0 = time.Now()
	osc("network", "create", "--external", "--provider-network-type", "flat", "--provider-physical-network", "extnet", "public")
	osc("subnet", "create", "--network", "public", "--subnet-range", "172.24.4.0/24", "--gateway", "172.24.4.1",
		"--no-dhcp", "--allocation-pool", "start=172.24.4.10,end=172.24.4.99", "public-subnet")
	osc("network", "create", "private")
	osc("subnet", "create", "--network", "private", "--subnet-range", "10.0.0.0/24", "--dns-nameserver", "10.0.0.1", "private-subnet")
	osc("router", "create", "router")
	osc("router", "set", "--external-gateway", "public", "router")
	osc("router", "add", "subnet", "router", "private-subnet")
	t.Logf("network, subnet and router in %.1f s", time.Since(t0).Seconds())

	userData := filepath.Join(t.TempDir(), "user-data.ign")
	if err := os.WriteFile(userData, ignition(), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	const name = "proof-1"
	serverID := osc("server", "create", "--flavor", "proof.small", "--image", "flatcar-standin", "--network", "private",
		"--config-drive", "True", "--user-data", userData, "-f", "value", "-c", "id", name)
	pc, err := cloud.Provider(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nova, err := cloud.Compute(pc)
	if err != nil {
		t.Fatal(err)
	}
	var server *servers.Server
	for {
		if server, err = servers.Get(ctx, nova, serverID).Extract(); err != nil {
			t.Fatal(err)
		}
		if server.Status == "ACTIVE" || server.Status == "ERROR" || ctx.Err() != nil {
			break
		}
		time.Sleep(3 * time.Second)
	}
	built := time.Since(t0)
	if server.Status != "ACTIVE" {
		t.Fatalf("server %s is %s, not ACTIVE: %v; logs in %s", name, server.Status, server.Fault, logDir)
	}
	t.Logf("server %s ACTIVE in %.0f s, addresses %v", name, built.Seconds(), server.Addresses)
	if !strings.Contains(fmt.Sprint(server.Addresses), "10.0.0.") {
		t.Errorf("server %s has no address on the private subnet: %v", name, server.Addresses)
	}

	// The guest's console: booted, applied the config drive's user-data, got its address by DHCP
	// and read the metadata service.
	var console string
	consoleDeadline := time.Now().Add(10 * time.Minute)
	for {
		console, err = servers.ShowConsoleOutput(ctx, nova, serverID, servers.ShowConsoleOutputOpts{}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(console, userDataMarker+" metadata") || ctx.Err() != nil || time.Now().After(consoleDeadline) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	booted := time.Since(t0)
	if err := os.WriteFile(filepath.Join(logDir, "console-"+name+".log"), []byte(console), 0o600); err != nil {
		t.Error(err)
	}
	for _, want := range []string{userDataMarker + " config-drive", userDataMarker + " addr 10.0.0.", userDataMarker + " metadata " + serverID} {
		if !strings.Contains(console, want) {
			t.Errorf("console of %s has no %q; its tail:\n%s", name, want, lastLines(console, 40))
		}
	}
	rss, byName := cloud.RSS()
	t.Logf("server booted (user-data applied) %.0f s after create; %d MiB resident with the guest: %v", booted.Seconds(), rss>>20, mib(byName))
	fmt.Println("CAPO-PROOF-BEGIN")
	fmt.Printf("glance image: flatcar-standin %s\n", imageID)
	fmt.Printf("server %s %s flatcar-standin\n", name, server.Status)
	fmt.Printf("cloud up: %.0f s, %d MiB idle; server ACTIVE: %.0f s; user-data applied: %.0f s; %d MiB with the guest\n",
		upTook.Seconds(), rssIdle>>20, built.Seconds(), booted.Seconds(), rss>>20)
	fmt.Println("CAPO-PROOF-END")
}

// ignition is the user-data: an Ignition 3 config with a unit that prints, to the serial console,
// the marker, the guest's IPv4 addresses and the instance UUID the metadata service gives.
func ignition() []byte {
	script := `#!/bin/sh
echo "` + userDataMarker + ` config-drive applied" >/dev/ttyS0
for i in $(seq 60); do
  a=$(ip -4 -o addr show scope global | awk '{print $4}')
  [ -n "$a" ] && break
  sleep 1
done
echo "` + userDataMarker + ` addr $a" >/dev/ttyS0
for i in $(seq 60); do
  m=$(curl -sf --max-time 5 http://169.254.169.254/openstack/latest/meta_data.json) && break
  sleep 2
done
echo "` + userDataMarker + ` metadata $(echo "$m" | jq -r .uuid)" >/dev/ttyS0
`
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.3.0"},
		"storage": map[string]any{"files": []any{map[string]any{
			"path": "/opt/capo-proof.sh", "mode": 0o755,
			"contents": map[string]any{"source": "data:;base64," + b64(script)},
		}}},
		"systemd": map[string]any{"units": []any{map[string]any{
			"name": "capo-proof.service", "enabled": true,
			"contents": "[Unit]\nAfter=network-online.target\nWants=network-online.target\n[Service]\nType=oneshot\nExecStart=/opt/capo-proof.sh\n[Install]\nWantedBy=multi-user.target\n",
		}}},
	}
	b, _ := json.Marshal(cfg)
	return b
}
