package testutil

import "testing"

// openStackComputeTools are what internal/testing/novatest runs besides scripts/openstack.sh's Keystone and
// Glance: Debian's Nova, Placement, Neutron, libvirt, RabbitMQ and MariaDB packages, which
// scripts/install-openstack-compute.sh installs (install-deps.sh's capo-proof profile).
var openStackComputeTools = []string{"nova-api", "nova-conductor", "nova-scheduler", "nova-compute",
	"nova-manage", "placement-manage", "neutron-server", "neutron-linuxbridge-agent", "neutron-dhcp-agent",
	"neutron-l3-agent", "neutron-metadata-agent", "neutron-db-manage", "libvirtd", "virtlogd",
	"rabbitmq-server", "genisoimage", "haproxy", "dnsmasq", "ip", "unshare", "mariadbd", "mariadb-install-db", "mariadb"}

// RequireOpenStackCompute skips the test, or fails it in strict mode, unless the OpenStack
// compute packages and Keystone + Glance are installed and the test runs as root (network
// namespaces, libvirtd).
func RequireOpenStackCompute(t testing.TB) {
	t.Helper()
	RequireTools(t, OpenStackTools...)
	RequireTools(t, openStackComputeTools...)
	RequireRoot(t, "OpenStack compute (network namespaces, bridges, libvirtd)")
}
