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

// The marker the user-data's unit writes to the console once the guest applied its user-data.
const userDataMarker = "CAPO-PROOF-USERDATA"

// TestComputeBootsServer is the first part of issue 46: a real Nova, Neutron and Placement from
// Debian's packages boot the stand-in guest from Glance on a Neutron network behind a router, twice:
// with a config drive carrying the user-data (an Ignition config), and without one, where the real
// Ignition (platform openstack) fetches it from the metadata service. Each server goes ACTIVE, its
// guest gets its address from Neutron's DHCP (dnsmasq's log acks it) and applies the user-data (a
// unit it defines prints the marker, its address and what it read from the metadata service through
// Neutron's metadata proxy and agent, which nova-api's log shows answered). The console says where
// Ignition took the user-data from.
func TestComputeBootsServer(t *testing.T) {
	testutil.RequireOptIn(t, proofEnv, "the OpenStack compute proof (make capo-proof)")
	testutil.RequireOpenStackCompute(t)
	testutil.RequireTools(t, standin.Tools...)
	// go test's -timeout bounds it (make capo-proof: CAPO_PROOF_TIMEOUT), less a minute to stop the
	// cloud: on a loaded machine two TCG guests take long past 40 minutes.
	deadline := time.Now().Add(40 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
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
	cloud := novatest.StartT(ctx, t, novatest.Options{Dir: t.TempDir(), LogDir: logDir, Log: t.Logf})
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

	pc, err := cloud.Provider(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nova, err := cloud.Compute(pc)
	if err != nil {
		t.Fatal(err)
	}
	// Both ways Nova hands user-data to a guest, booted side by side: a config drive (what
	// force_config_drive gives every server), and none, where Ignition must fetch it from the
	// metadata service through Neutron's metadata proxy and agent.
	proofs := []*proofServer{{name: "proof-cd", configDrive: true}, {name: "proof-md"}}
	for _, p := range proofs {
		p.userData = ignition(p.name)
		file := filepath.Join(t.TempDir(), "user-data.ign")
		if err := os.WriteFile(file, p.userData, 0o600); err != nil {
			t.Fatal(err)
		}
		p.created = time.Now()
		p.id = osc("server", "create", "--flavor", "proof.small", "--image", "flatcar-standin", "--network", "private",
			"--config-drive", fmt.Sprint(p.configDrive), "--user-data", file, "-f", "value", "-c", "id", p.name)
	}
	for _, p := range proofs {
		for {
			if p.server, err = servers.Get(ctx, nova, p.id).Extract(); err != nil {
				t.Fatal(err)
			}
			if p.server.Status == "ACTIVE" || p.server.Status == "ERROR" || ctx.Err() != nil {
				break
			}
			time.Sleep(3 * time.Second)
		}
		p.active = time.Since(p.created)
		if p.server.Status != "ACTIVE" {
			t.Fatalf("server %s is %s, not ACTIVE: %v; logs in %s", p.name, p.server.Status, p.server.Fault, logDir)
		}
		p.ip, p.mac = fixedAddress(p.server.Addresses)
		t.Logf("server %s ACTIVE in %.0f s, address %s (%s)", p.name, p.active.Seconds(), p.ip, p.mac)
		if !strings.HasPrefix(p.ip, "10.0.0.") {
			t.Errorf("server %s has no address on the private subnet: %v", p.name, p.server.Addresses)
		}
	}

	// The guests' consoles: each applied its user-data (a unit it defines prints the marker), got
	// its address from Neutron's DHCP and read meta_data.json and user_data from the metadata service.
	consoleDeadline := time.Now().Add(30 * time.Minute)
	for pending := len(proofs); pending > 0 && ctx.Err() == nil && time.Now().Before(consoleDeadline); {
		pending = 0
		for _, p := range proofs {
			if p.applied > 0 && p.done {
				continue
			}
			if p.console, err = servers.ShowConsoleOutput(ctx, nova, p.id, servers.ShowConsoleOutputOpts{}).Extract(); err != nil {
				t.Fatal(err)
			}
			if p.applied == 0 && strings.Contains(p.console, userDataMarker+" "+p.name+" applied") {
				p.applied = time.Since(p.created)
			}
			if p.done = strings.Contains(p.console, userDataMarker+" "+p.name+" metadata"); !p.done {
				pending++
			}
		}
		time.Sleep(5 * time.Second)
	}
	acks, err := cloud.DHCPAcks()
	if err != nil {
		t.Error(err)
	}
	reqs, err := cloud.MetadataRequests()
	if err != nil {
		t.Error(err)
	}
	for _, p := range proofs {
		if err := os.WriteFile(filepath.Join(logDir, "console-"+p.name+".log"), []byte(p.console), 0o600); err != nil {
			t.Error(err)
		}
		p.check(t, cloud.Dir, acks, reqs)
	}
	rss, byName := cloud.RSS()
	t.Logf("%d MiB resident with the guests: %v", rss>>20, mib(byName))
	fmt.Println("CAPO-PROOF-BEGIN")
	fmt.Printf("glance image: flatcar-standin %s\n", imageID)
	for _, p := range proofs {
		fmt.Printf("server %s %s flatcar-standin\n", p.name, p.server.Status)
	}
	for _, p := range proofs {
		for _, l := range p.evidence {
			fmt.Println(l)
		}
	}
	fmt.Printf("cloud up: %.0f s, %d MiB idle; servers ACTIVE: %s; user-data applied: %s; %d MiB with the guests\n",
		upTook.Seconds(), rssIdle>>20, each(proofs, func(p *proofServer) time.Duration { return p.active }),
		each(proofs, func(p *proofServer) time.Duration { return p.applied }), rss>>20)
	fmt.Println("CAPO-PROOF-END")
}

// ignition is NAME's user-data: an Ignition 3 config with a unit that prints, to the serial
// console, the marker, the guest's IPv4 addresses, and the instance UUID and the user-data's
// SHA-256 the metadata service gives.
func ignition(name string) []byte {
	mark := userDataMarker + " " + name
	script := `#!/bin/sh
echo "` + mark + ` applied" >/dev/ttyS0
for i in $(seq 60); do
  a=$(ip -4 -o addr show scope global | awk '{print $4}')
  [ -n "$a" ] && break
  sleep 1
done
echo "` + mark + ` addr $a" >/dev/ttyS0
echo "` + mark + ` routes $(ip -4 route | tr '\n' ';')" >/dev/ttyS0
for i in $(seq 60); do
  m=$(curl -sf --max-time 5 http://169.254.169.254/openstack/latest/meta_data.json) && break
  sleep 2
done
u=$(curl -sf --max-time 5 http://169.254.169.254/openstack/latest/user_data | sha256sum | cut -d' ' -f1)
echo "` + mark + ` metadata $(echo "$m" | jq -r .uuid) user_data $u" >/dev/ttyS0
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
