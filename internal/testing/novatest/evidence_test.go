package novatest

import (
	"strings"
	"testing"
	"time"
)

// Lines as Debian 12's dnsmasq 2.90 (--log-dhcp) and nova-api 26.2.2 wrote them in a proof run.
func TestParseDHCPAcks(t *testing.T) {
	log := `Dec  5 23:18:28 dnsmasq-dhcp[7171]: read /tmp/i46/hosts
Dec  5 23:18:29 dnsmasq-dhcp[7171]: 3071189800 DHCPOFFER(ns-b99a6b80-30) 10.0.0.16 fa:16:3e:2c:b6:c4 
Dec  5 23:18:29 dnsmasq-dhcp[7171]: 3071189800 DHCPREQUEST(ns-b99a6b80-30) 10.0.0.16 fa:16:3e:2c:b6:c4 
Dec  5 23:18:29 dnsmasq-dhcp[7171]: 3071189800 DHCPACK(ns-b99a6b80-30) 10.0.0.16 fa:16:3e:2c:b6:c4 host-10-0-0-16
Dec 12 01:02:03 dnsmasq-dhcp[7171]: 17 DHCPACK(ns-b99a6b80-30) 10.0.0.17 fa:16:3e:00:00:01 host-10-0-0-17
`
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.Local)
	acks, err := parseDHCPAcks(strings.NewReader(log), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Lease{
		{time.Date(2026, 12, 5, 23, 18, 29, 0, time.Local), "10.0.0.16", "fa:16:3e:2c:b6:c4"},
		{time.Date(2025, 12, 12, 1, 2, 3, 0, time.Local), "10.0.0.17", "fa:16:3e:00:00:01"}, // later than now: last year's
	}
	if len(acks) != len(want) {
		t.Fatalf("got %d leases %v, want %v", len(acks), acks, want)
	}
	for i := range want {
		if !acks[i].Time.Equal(want[i].Time) || acks[i].IP != want[i].IP || acks[i].MAC != want[i].MAC {
			t.Errorf("lease %d: got %+v, want %+v", i, acks[i], want[i])
		}
	}
}

func TestParseMetadataRequests(t *testing.T) {
	log := `2026-12-05 23:14:11.868 3088 INFO nova.metadata.wsgi.server [None req-c9efe325-5d20-4041-a85e-cec1d129f045 - - - - - -] ::ffff:10.0.0.16,127.0.0.1 "GET /openstack/latest/meta_data.json HTTP/1.1" status: 200 len: 1071 time: 2.1420481
2026-12-05 23:14:12.001 3088 INFO nova.osapi_compute.wsgi.server [None req-1 - - - - - -] 127.0.0.1 "GET /v2.1/servers HTTP/1.1" status: 200 len: 10 time: 0.1
2026-12-05 23:14:13.500 3088 INFO nova.metadata.wsgi.server [None req-2 - - - - - -] 10.0.0.17,127.0.0.1 "GET /openstack/latest/user_data HTTP/1.1" status: 404 len: 10 time: 0.1
`
	reqs, err := parseMetadataRequests(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []MetadataRequest{
		{time.Date(2026, 12, 5, 23, 14, 11, 868e6, time.Local), "10.0.0.16", "/openstack/latest/meta_data.json", 200},
		{time.Date(2026, 12, 5, 23, 14, 13, 500e6, time.Local), "10.0.0.17", "/openstack/latest/user_data", 404},
	}
	if len(reqs) != len(want) {
		t.Fatalf("got %d requests %v, want %v", len(reqs), reqs, want)
	}
	for i := range want {
		if !reqs[i].Time.Equal(want[i].Time) || reqs[i] != (MetadataRequest{reqs[i].Time, want[i].From, want[i].Path, want[i].Status}) {
			t.Errorf("request %d: got %+v, want %+v", i, reqs[i], want[i])
		}
	}
}
