package novatest

import (
	"bytes"
	"os"
	"path/filepath"
	"text/template"
)

// The fixed ports of the namespace's loopback (nothing else listens there).
const (
	novaPort      = 8774
	metadataPort  = 8775
	placementPort = 8778
	neutronPort   = 9696
	rabbitPort    = 5672
)

// confValues fill the templates.
type confValues struct {
	Dir, LogDir        string
	Keystone           string // http://127.0.0.1:PORT (no /v3)
	Password           string // Keystone's admin password (every service authenticates as admin)
	Secret             string // the metadata proxy's shared secret
	TunnelIP           string
	ExternalDev        string
	RabbitPort         int
	NovaPort, MetaPort int
	PlacementPort      int
	NeutronPort        int
	ForceConfigDrive   bool
	NovaAPIDB, NovaDB  string // SQLAlchemy URLs of the MariaDB databases
	NeutronDB          string
}

// authSection is the keystoneauth block every service uses to call another (and keystonemiddleware
// to check tokens): the admin user of Keystone's bootstrap.
const authSection = `auth_url = {{.Keystone}}/v3
auth_type = password
username = admin
password = {{.Password}}
project_name = admin
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
`

const keystoneAuthtoken = `[keystone_authtoken]
www_authenticate_uri = {{.Keystone}}/v3
` + authSection + `
`

const transport = `transport_url = rabbit://guest:guest@127.0.0.1:{{.RabbitPort}}/
`

var configs = map[string]string{
	"placement/placement.conf": `[DEFAULT]
log_file = {{.LogDir}}/placement.log
[api]
auth_strategy = keystone
[placement_database]
connection = sqlite:///{{.Dir}}/placement/placement.sqlite
` + keystoneAuthtoken,

	// One worker per service: 2 shared cores. Nova's and Neutron's databases are MariaDB's: several
	// of their processes write (api, conductor, scheduler; neutron's API and RPC workers), which
	// sqlite refuses ("database is locked" on heartbeats, router updates).
	"nova/nova.conf": `[DEFAULT]
` + transport + `my_ip = {{.TunnelIP}}
state_path = {{.Dir}}/nova
instances_path = {{.Dir}}/nova/instances
log_dir = {{.LogDir}}
compute_driver = libvirt.LibvirtDriver
enabled_apis = osapi_compute,metadata
# Every address of the namespace: guests reach the API at its external address (netns.go).
osapi_compute_listen = 0.0.0.0
osapi_compute_listen_port = {{.NovaPort}}
osapi_compute_workers = 1
metadata_listen = 127.0.0.1
metadata_listen_port = {{.MetaPort}}
metadata_workers = 1
force_config_drive = {{.ForceConfigDrive}}
# Nova's default ISO 9660 drive (IDE CD-ROM): config_drive_format = vfat cannot work here, Nova
# loop-mounts the drive to fill it and this host kernel has no vfat ("unknown filesystem type").
# qcow2 kept as qcow2 in _base: no 3 GB raw copy of each image
force_raw_images = False
ram_allocation_ratio = 4.0
cpu_allocation_ratio = 16.0
reserved_host_memory_mb = 256
# CAPO boots and deletes servers; nothing should wait long on a missing vif event in a test.
vif_plugging_timeout = 120
heal_instance_info_cache_interval = 0
[wsgi]
api_paste_config = /etc/nova/api-paste.ini
[api]
auth_strategy = keystone
[api_database]
connection = {{.NovaAPIDB}}
[database]
connection = {{.NovaDB}}
` + keystoneAuthtoken + `[placement]
` + authSection + `
[neutron]
` + authSection + `service_metadata_proxy = True
metadata_proxy_shared_secret = {{.Secret}}
[glance]
region_name = RegionOne
[libvirt]
virt_type = qemu
cpu_mode = none
connection_uri = qemu:///system?socket={{.Dir}}/libvirt/run/libvirt-sock
[scheduler]
discover_hosts_in_cells_interval = 5
[conductor]
workers = 1
[vnc]
enabled = False
[spice]
enabled = False
[serial_console]
enabled = False
[oslo_concurrency]
lock_path = {{.Dir}}/nova/lock
[oslo_messaging_notifications]
driver = noop
[os_vif_linux_bridge]
use_ipv6 = False
`,

	"neutron/neutron.conf": `[DEFAULT]
` + transport + `# Every address of the namespace: guests reach the API at its external address (netns.go).
bind_host = 0.0.0.0
bind_port = {{.NeutronPort}}
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
state_path = {{.Dir}}/neutron
api_workers = 1
rpc_workers = 1
rpc_state_report_workers = 1
notify_nova_on_port_status_changes = True
notify_nova_on_port_data_changes = True
dhcp_agents_per_network = 1
[database]
connection = {{.NeutronDB}}
` + keystoneAuthtoken + `[nova]
` + authSection + `
[agent]
root_helper = sudo neutron-rootwrap /etc/neutron/rootwrap.conf
# Zed marks the Linux bridge driver experimental; without this neutron-server refuses to start.
[experimental]
linuxbridge = True
[oslo_concurrency]
lock_path = {{.Dir}}/neutron/lock
[oslo_messaging_notifications]
driver = noop
`,
	"neutron/ml2_conf.ini": `[ml2]
type_drivers = flat,vxlan
tenant_network_types = vxlan
mechanism_drivers = linuxbridge,l2population
extension_drivers = port_security
[ml2_type_flat]
flat_networks = extnet
[ml2_type_vxlan]
vni_ranges = 1:1000
`,
	"neutron/linuxbridge_agent.ini": `[linux_bridge]
physical_interface_mappings = extnet:{{.ExternalDev}}
[vxlan]
enable_vxlan = True
local_ip = {{.TunnelIP}}
l2_population = True
[securitygroup]
enable_security_group = True
firewall_driver = iptables
`,
	// dnsmasq drops to nobody, and on every port change re-reads its hosts file from
	// Dir/neutron/dhcp, under the test's 0700 temp dirs: as nobody it could not, kept the host list
	// it started with (no guest) and ignored every guest's DHCPDISCOVER. It stays root here (a
	// deployment's /var/lib/neutron lets nobody through). Its log, per network, has the leases.
	// The metadata service is the router's proxy (the L3 agent's): a network is created before its
	// router interface, so with isolated metadata on the DHCP agent started a proxy of its own too,
	// and under load (privsep helpers taking 80 s each) that start raised and left the network with
	// no dnsmasq at all. A network without a router would need it back on.
	"neutron/dhcp_agent.ini": `[DEFAULT]
interface_driver = linuxbridge
enable_isolated_metadata = False
dnsmasq_config_file = {{.Dir}}/neutron/dnsmasq.conf
dnsmasq_base_log_dir = {{.LogDir}}/dnsmasq
`,
	"neutron/dnsmasq.conf": `user=root
`,
	"neutron/l3_agent.ini": `[DEFAULT]
interface_driver = linuxbridge
`,
	"neutron/metadata_agent.ini": `[DEFAULT]
nova_metadata_host = 127.0.0.1
nova_metadata_port = {{.MetaPort}}
metadata_proxy_shared_secret = {{.Secret}}
metadata_workers = 1
`,

	// libvirtd runs in a mount namespace of its own where Dir/libvirt/etc is /etc/libvirt (so this
	// qemu.conf is the one it reads) and Dir/libvirt/run is /run/libvirt.
	"libvirt/etc/libvirtd.conf": `unix_sock_dir = "/run/libvirt"
unix_sock_group = "root"
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:stderr"
`,
	"libvirt/etc/virtlogd.conf": `log_outputs = "3:stderr"
`,
	// root, no confinement, no cgroups: PID 1 is not systemd and the files live in a temp dir.
	"libvirt/etc/qemu.conf": `user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
remember_owner = 0
`,
}

// writeConfigs renders every file under dir.
func writeConfigs(dir string, v confValues) error {
	for name, text := range configs {
		t, err := template.New(name).Option("missingkey=error").Parse(text)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, v); err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			return err
		}
	}
	return nil
}
