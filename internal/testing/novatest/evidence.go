package novatest

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// What the cloud's own logs say a guest got: the DHCP leases of Neutron's dnsmasq and the
// requests nova-api's metadata API answered (the guest's proof that the path through Neutron's
// metadata proxy and agent works, seen from the far end).

// Lease is a DHCPACK of the DHCP agent's dnsmasq.
type Lease struct {
	Time    time.Time
	IP, MAC string
}

// MetadataRequest is one request nova-api's metadata API answered; From is the guest's address
// the metadata agent forwarded.
type MetadataRequest struct {
	Time       time.Time
	From, Path string
	Status     int
}

// DHCPAcks lists the leases every network's dnsmasq logged (LogDir/dnsmasq/NETWORK/dhcp_dns_log),
// oldest first.
func (c *Cloud) DHCPAcks() ([]Lease, error) {
	logs, err := filepath.Glob(filepath.Join(c.LogDir, "dnsmasq", "*", "dhcp_dns_log"))
	if err != nil {
		return nil, err
	}
	var all []Lease
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			return nil, err
		}
		acks, err := parseDHCPAcks(f, time.Now())
		f.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, acks...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	return all, nil
}

// MetadataRequests lists what nova-api's metadata API answered (LogDir/nova-api.log), in order.
func (c *Cloud) MetadataRequests() ([]MetadataRequest, error) {
	f, err := os.Open(filepath.Join(c.LogDir, "nova-api.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMetadataRequests(f)
}

// dnsmasq's log: "Dec  5 23:14:04 dnsmasq-dhcp[14874]: 3158351489 DHCPACK(ns-b99a6b80-30) 10.0.0.16
// fa:16:3e:2c:b6:c4 host-10-0-0-16" (the number is --log-dhcp's transaction ID).
var dhcpAck = regexp.MustCompile(`^(\w{3} [ \d]\d \d\d:\d\d:\d\d) dnsmasq-dhcp\[\d+\]: (?:\d+ )?DHCPACK\([^)]*\) (\S+) ([0-9a-f:]{17})`)

// parseDHCPAcks reads dnsmasq's log; its stamps have no year, so now's (the year before when that
// would put them in the future: a log read just after New Year).
func parseDHCPAcks(r io.Reader, now time.Time) ([]Lease, error) {
	var acks []Lease
	s := bufio.NewScanner(r)
	for s.Scan() {
		m := dhcpAck.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		t, err := time.ParseInLocation("Jan _2 15:04:05", m[1], time.Local)
		if err != nil {
			continue
		}
		t = t.AddDate(now.Year(), 0, 0)
		if t.After(now.Add(24 * time.Hour)) {
			t = t.AddDate(-1, 0, 0)
		}
		acks = append(acks, Lease{Time: t, IP: m[2], MAC: m[3]})
	}
	return acks, s.Err()
}

// nova-api's log: `2026-12-05 23:14:11.868 3088 INFO nova.metadata.wsgi.server [...] ::ffff:10.0.0.16,127.0.0.1
// "GET /openstack/latest/meta_data.json HTTP/1.1" status: 200 len: 1071 time: 2.1420481`.
var metadataLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \d+ INFO nova\.metadata\.wsgi\.server \[[^\]]*\] (?:::ffff:)?([0-9.]+),\S* "GET (\S+) HTTP/1\.[01]" status: (\d+)`)

func parseMetadataRequests(r io.Reader) ([]MetadataRequest, error) {
	var reqs []MetadataRequest
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20) // tracebacks make long lines
	for s.Scan() {
		m := metadataLine.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02 15:04:05.000", m[1], time.Local)
		if err != nil {
			continue
		}
		status, _ := strconv.Atoi(m[4])
		reqs = append(reqs, MetadataRequest{Time: t, From: m[2], Path: m[3], Status: status})
	}
	return reqs, s.Err()
}
