package novatest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
)

// proofServer is one server of the proof and what its guest and the cloud's logs show of it.
type proofServer struct {
	name        string
	configDrive bool
	userData    []byte

	id, ip, mac string
	server      *servers.Server
	created     time.Time
	active      time.Duration // create to ACTIVE
	applied     time.Duration // create to the user-data's unit on the console (0: never)
	done        bool          // its unit printed what it read from the metadata service
	console     string
	evidence    []string // lines for the CAPO-PROOF block
}

// Ignition's own log lines (coreos/ignition v2.24: internal/resource/http.go, providers/openstack),
// which the stand-in's initrd copies to the kernel log and so to the serial console.
const (
	ignitionConfigDrive = "[finished] mounting config drive"
	ignitionMetadataGET = "GET http://169.254.169.254/openstack/latest/user_data: attempt #"
	ignitionGETOK       = "GET result: OK"
)

// check asserts, from the guest's console and the cloud's logs, that the guest got its address from
// Neutron's DHCP, that Ignition took the user-data from where it should (the config drive, or the
// metadata service when there is none) and that the guest read the metadata service through
// Neutron's metadata agent; it records the evidence lines.
func (p *proofServer) check(t *testing.T, cloudDir string, acks []novatest.Lease, reqs []novatest.MetadataRequest) {
	t.Helper()
	sum := sha256.Sum256(p.userData)
	mark := userDataMarker + " " + p.name
	for _, want := range []string{mark + " applied", mark + " addr 10.0.0.", mark + " metadata " + p.id + " user_data " + hex.EncodeToString(sum[:])} {
		if !strings.Contains(p.console, want) {
			t.Errorf("console of %s has no %q; its tail:\n%s", p.name, want, lastLines(p.console, 40))
		}
	}

	var first novatest.Lease
	n := 0
	for _, a := range acks {
		if a.MAC == p.mac && a.IP == p.ip {
			if n == 0 {
				first = a
			}
			n++
		}
	}
	if n == 0 {
		t.Errorf("Neutron's dnsmasq acked no lease of %s to %s (%s)", p.ip, p.name, p.mac)
	} else {
		p.evidence = append(p.evidence, fmt.Sprintf("dhcp %s: %s to %s acked %.0f s after create (%d acks)",
			p.name, p.ip, p.mac, first.Time.Sub(p.created).Seconds(), n))
	}

	_, err := os.Stat(filepath.Join(cloudDir, "nova", "instances", p.id, "disk.config"))
	hasDrive := err == nil
	mounted := strings.Contains(p.console, ignitionConfigDrive)
	fetched := strings.Contains(p.console, ignitionMetadataGET) && strings.Contains(p.console, ignitionGETOK)
	switch {
	case p.configDrive && (!hasDrive || !mounted):
		t.Errorf("%s: Nova's config drive exists: %v; Ignition's log has %q: %v", p.name, hasDrive, ignitionConfigDrive, mounted)
	case p.configDrive:
		also := ""
		if fetched {
			also = " (the metadata service answered Ignition too)"
		}
		p.evidence = append(p.evidence, fmt.Sprintf("ignition %s: user-data from the config drive (config-2)%s, applied %.0f s after create",
			p.name, also, p.applied.Seconds()))
	case hasDrive || mounted || !fetched:
		t.Errorf("%s has no config drive, yet Nova's config drive exists: %v, Ignition mounted one: %v; Ignition's log has %q and %q: %v",
			p.name, hasDrive, mounted, ignitionMetadataGET, ignitionGETOK, fetched)
	default:
		p.evidence = append(p.evidence, fmt.Sprintf("ignition %s: user-data from http://169.254.169.254/openstack/latest/user_data (no config drive), applied %.0f s after create",
			p.name, p.applied.Seconds()))
	}

	// The far end: nova-api's metadata API answered this guest's address (the metadata agent
	// forwards it), so the path went through Neutron's proxy and agent.
	got := map[string]novatest.MetadataRequest{}
	for _, r := range reqs {
		if _, seen := got[r.Path]; r.From == p.ip && r.Status == 200 && !seen {
			got[r.Path] = r
		}
	}
	for _, path := range []string{"/openstack/latest/meta_data.json", "/openstack/latest/user_data"} {
		r, ok := got[path]
		if !ok {
			t.Errorf("nova-api's metadata API answered no GET %s from %s (%s)", path, p.ip, p.name)
			continue
		}
		p.evidence = append(p.evidence, fmt.Sprintf("metadata %s: GET %s 200 from %s %.0f s after create",
			p.name, path, p.ip, r.Time.Sub(p.created).Seconds()))
	}
}

// fixedAddress is the server's first fixed IPv4 address and its MAC.
func fixedAddress(addresses map[string]any) (ip, mac string) {
	for _, net := range addresses {
		list, _ := net.([]any)
		for _, a := range list {
			m, _ := a.(map[string]any)
			if m["OS-EXT-IPS:type"] == "fixed" && fmt.Sprint(m["version"]) == "4" {
				ip, _ = m["addr"].(string)
				mac, _ = m["OS-EXT-IPS-MAC:mac_addr"].(string)
				return ip, mac
			}
		}
	}
	return "", ""
}

// each renders one duration per server: "proof-cd 31 s, proof-md 35 s".
func each(proofs []*proofServer, d func(*proofServer) time.Duration) string {
	var parts []string
	for _, p := range proofs {
		parts = append(parts, fmt.Sprintf("%s %.0f s", p.name, d(p).Seconds()))
	}
	return strings.Join(parts, ", ")
}
