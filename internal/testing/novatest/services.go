package novatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/netns"
)

const python = "/usr/bin/python3" // a pyenv python3 may shadow Debian's, which has the OpenStack modules

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// up starts the services in dependency order, overlapping what can overlap on 2 cores:
// RabbitMQ, Keystone + Glance and the database syncs first, then the APIs, then the agents and
// the compute service.
func (c *Cloud) up(ctx context.Context) error {
	start := time.Now()
	if err := createNetns(ctx, c.Netns); err != nil {
		return err
	}
	c.record("netns", c.Netns)
	c.timed("network namespace", start)

	// Keystone + Glance: the project's one way to start them, run inside the namespace.
	osDir := filepath.Join(c.Dir, "keystone-glance")
	c.record("script", c.opts.OpenStackScript)
	c.record("openstack", osDir)
	ksDone := make(chan error, 1)
	go func() {
		t := time.Now()
		// Keystone on every address of the namespace: guests reach it at externalGW (netns.go).
		err := c.run(ctx, "keystone-glance", []string{"KEYSTONE_LISTEN=0.0.0.0"}, "bash", c.opts.OpenStackScript, "up", osDir, "--owner", fmt.Sprint(os.Getpid()))
		if err == nil {
			c.timed("keystone + glance", t)
		}
		ksDone <- err
	}()
	rabbit, err := c.startRabbit()
	if err != nil {
		return err
	}
	mysql, err := c.startMariaDB(ctx)
	if err != nil {
		return err
	}

	// Configs need Keystone's URL and password, which the script chose: wait for it.
	if err := <-ksDone; err != nil {
		return err
	}
	env, err := readEnv(filepath.Join(osDir, "env"))
	if err != nil {
		return err
	}
	rc, err := readEnv(filepath.Join(osDir, "openrc"))
	if err != nil {
		return err
	}
	c.CloudsYAML = env["OS_CLIENT_CONFIG_FILE"]
	c.keystone = strings.TrimSuffix(env["KEYSTONE_URL"], "/v3")
	c.password = rc["OS_PASSWORD"]
	ksURL, err := url.Parse(c.keystone)
	if err != nil || ksURL.Port() == "" {
		return fmt.Errorf("keystone's URL %q from %s has no port", c.keystone, osDir)
	}
	c.keystonePort = ksURL.Port()
	v := confValues{Dir: c.Dir, LogDir: c.LogDir, Keystone: c.keystone, Password: rc["OS_PASSWORD"],
		Secret: randomHex(16), TunnelIP: tunnelIP, ExternalDev: externalDev, RabbitPort: rabbitPort,
		NovaPort: novaPort, MetaPort: metadataPort, PlacementPort: placementPort, NeutronPort: neutronPort,
		ForceConfigDrive: c.opts.ForceConfigDrive,
		NovaAPIDB:        c.mysqlURL("nova_api"), NovaDB: c.mysqlURL("nova"), NeutronDB: c.mysqlURL("neutron")}
	if err := writeConfigs(c.Dir, v); err != nil {
		return err
	}
	for _, d := range []string{"nova/instances", "nova/lock", "neutron/lock", "placement", "libvirt/run", "libvirt/lib"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}

	// Catalog and database syncs, two at a time.
	t := time.Now()
	syncs := []func() error{
		func() error { return c.registerCatalog(ctx) },
		c.syncPlacement(ctx),
		c.syncNova(ctx),
		c.syncNeutron(ctx),
	}
	if err := parallel(2, syncs); err != nil {
		return err
	}
	c.timed("catalog + database syncs", t)
	if err := c.waitTCP(ctx, rabbit, "127.0.0.1", rabbitPort, 90*time.Second); err != nil {
		return err
	}

	// The APIs and the daemons.
	t = time.Now()
	placement, err := c.start("placement-api", []string{"OS_PLACEMENT_CONFIG_DIR=" + filepath.Join(c.Dir, "placement")},
		"uwsgi", "--plugin", "python3", "--http-socket", fmt.Sprintf("127.0.0.1:%d", placementPort),
		"--wsgi-file", "/usr/bin/placement-api", "--master", "--processes", "1", "--threads", "1",
		"--die-on-term", "--no-orphans", "--add-header", "Connection: close", "--buffer-size", "65535")
	if err != nil {
		return err
	}
	nova := func(bin string) []string {
		return []string{python, "/usr/bin/" + bin, "--config-file", filepath.Join(c.Dir, "nova/nova.conf")}
	}
	neutron := func(bin string, ini ...string) []string {
		a := []string{python, "/usr/bin/" + bin, "--config-file", filepath.Join(c.Dir, "neutron/neutron.conf")}
		for _, i := range ini {
			a = append(a, "--config-file", filepath.Join(c.Dir, "neutron", i))
		}
		return a
	}
	novaAPI, err := c.start("nova-api", nil, nova("nova-api")...)
	if err != nil {
		return err
	}
	neutronServer, err := c.start("neutron-server", nil, neutron("neutron-server", "ml2_conf.ini")...)
	if err != nil {
		return err
	}
	libvirt, err := c.startLibvirt()
	if err != nil {
		return err
	}
	daemons := []struct {
		name string
		argv []string
	}{
		{"nova-conductor", nova("nova-conductor")},
		{"nova-scheduler", nova("nova-scheduler")},
		{"neutron-linuxbridge-agent", neutron("neutron-linuxbridge-agent", "linuxbridge_agent.ini")},
		{"neutron-dhcp-agent", neutron("neutron-dhcp-agent", "dhcp_agent.ini")},
		{"neutron-l3-agent", neutron("neutron-l3-agent", "l3_agent.ini")},
		{"neutron-metadata-agent", neutron("neutron-metadata-agent", "metadata_agent.ini")},
	}
	watch := []*proc{rabbit, mysql, placement, novaAPI, neutronServer, libvirt}
	for _, d := range daemons {
		p, err := c.start(d.name, nil, d.argv...)
		if err != nil {
			return err
		}
		watch = append(watch, p)
	}
	if err := c.waitFile(ctx, libvirt, filepath.Join(c.Dir, "libvirt/run/libvirt-sock"), 60*time.Second); err != nil {
		return err
	}
	compute, err := c.start("nova-compute", nil, nova("nova-compute")...)
	if err != nil {
		return err
	}
	watch = append(watch, compute)
	for _, api := range []struct {
		p    *proc
		port int
		path string
	}{{placement, placementPort, "/"}, {novaAPI, novaPort, "/"}, {novaAPI, metadataPort, "/"}, {neutronServer, neutronPort, "/"}} {
		if err := c.waitHTTP(ctx, api.p, fmt.Sprintf("http://127.0.0.1:%d%s", api.port, api.path), 180*time.Second); err != nil {
			return err
		}
	}
	c.timed("placement, nova-api, neutron-server", t)

	// Ready: the compute host is mapped and the agents are alive.
	t = time.Now()
	if err := c.waitReady(ctx, watch, 300*time.Second); err != nil {
		return err
	}
	c.timed("nova-compute and the neutron agents", t)
	c.timed("the whole cloud", start)
	return nil
}

// startRabbit runs RabbitMQ with its state in Dir/rabbitmq, as root, on the namespace's loopback.
func (c *Cloud) startRabbit() (*proc, error) {
	d := filepath.Join(c.Dir, "rabbitmq")
	if err := os.MkdirAll(filepath.Join(d, "mnesia"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "enabled_plugins"), []byte("[].\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "rabbitmq-env.conf"), nil, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "rabbitmq.conf"), []byte(fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\ndisk_free_limit.absolute = 50MB\n", rabbitPort)), 0o600); err != nil {
		return nil, err
	}
	env := []string{"HOME=" + d, "RABBITMQ_NODENAME=rabbit@localhost", "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"ERL_EPMD_ADDRESS=127.0.0.1", "RABBITMQ_MNESIA_BASE=" + filepath.Join(d, "mnesia"),
		"RABBITMQ_LOG_BASE=" + c.LogDir, "RABBITMQ_LOGS=" + filepath.Join(c.LogDir, "rabbitmq-server.log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(d, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(d, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(d, "enabled_plugins"),
		"RABBITMQ_PID_FILE=" + filepath.Join(d, "pid"),
		// No busy-waiting schedulers: the 2 cores are shared.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=+sbwt none +sbwtdcpu none +sbwtdio none"}
	return c.start("rabbitmq", env, "/usr/lib/rabbitmq/bin/rabbitmq-server")
}

// startLibvirt runs virtlogd and libvirtd in a mount namespace of their own in which
// Dir/libvirt/etc is /etc/libvirt (the qemu.conf a privileged libvirtd reads has a fixed path),
// /run/libvirt and /var/lib/libvirt are Dir's and /var/log/libvirt is LogDir/libvirt: nothing
// of the host's libvirt is read or written. The package's other files under /etc/libvirt are copied first,
// without its autostarted default network.
func (c *Cloud) startLibvirt() (*proc, error) {
	d := filepath.Join(c.Dir, "libvirt")
	if out, err := exec.Command("cp", "-an", "/etc/libvirt/.", filepath.Join(d, "etc")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying /etc/libvirt: %v: %s", err, out)
	}
	_ = os.RemoveAll(filepath.Join(d, "etc/qemu/networks/autostart"))
	for _, m := range []string{"/run/libvirt", "/var/lib/libvirt", "/var/log/libvirt"} {
		if err := os.MkdirAll(m, 0o755); err != nil { // mount points; the package makes them too
			return nil, err
		}
	}
	script := `set -e
mount --make-rprivate /
mount --bind "$1/etc" /etc/libvirt
mount --bind "$1/run" /run/libvirt
mount --bind "$1/lib" /var/lib/libvirt
mount --bind "$2" /var/log/libvirt
mkdir -p /var/lib/libvirt/qemu /var/log/libvirt/qemu
virtlogd --config /etc/libvirt/virtlogd.conf --pid-file /run/libvirt/virtlogd.pid &
exec libvirtd --config /etc/libvirt/libvirtd.conf --pid-file /run/libvirt/libvirtd.pid`
	logs := filepath.Join(c.LogDir, "libvirt") // the guests' QEMU logs: LogDir/libvirt/qemu
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return nil, err
	}
	return c.start("libvirtd", nil, "unshare", "--mount", "--", "bash", "-c", script, "libvirtd", d, logs)
}

// startMariaDB runs a MariaDB of its own (data in Dir/mariadb, reached by its socket only) and
// makes the databases of Nova and Neutron.
func (c *Cloud) startMariaDB(ctx context.Context) (*proc, error) {
	d := filepath.Join(c.Dir, "mariadb")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, err
	}
	if err := c.run(ctx, "mariadb-install-db", nil, "mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(d, "data"),
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"); err != nil {
		return nil, err
	}
	p, err := c.start("mariadb", nil, "mariadbd", "--no-defaults", "--user=root", "--datadir="+filepath.Join(d, "data"),
		"--socket="+filepath.Join(d, "mysqld.sock"), "--skip-networking", "--skip-log-bin",
		"--innodb-buffer-pool-size=64M", "--performance-schema=OFF", "--pid-file="+filepath.Join(d, "mysqld.pid"))
	if err != nil {
		return nil, err
	}
	if err := c.waitFile(ctx, p, filepath.Join(d, "mysqld.sock"), 120*time.Second); err != nil {
		return nil, err
	}
	sql := "CREATE DATABASE IF NOT EXISTS nova_api; CREATE DATABASE IF NOT EXISTS nova_cell0; " +
		"CREATE DATABASE IF NOT EXISTS nova; CREATE DATABASE IF NOT EXISTS neutron;"
	if err := c.run(ctx, "mariadb-create", nil, "mariadb", "--no-defaults", "--socket="+filepath.Join(d, "mysqld.sock"), "-uroot", "-e", sql); err != nil {
		return nil, err
	}
	return p, nil
}

// mysqlURL is the SQLAlchemy URL of database db on that MariaDB.
func (c *Cloud) mysqlURL(db string) string {
	return "mysql+pymysql://root@localhost/" + db + "?unix_socket=" + filepath.Join(c.Dir, "mariadb", "mysqld.sock") + "&charset=utf8"
}

// registerCatalog puts Nova, Placement and Neutron into Keystone's catalog (RegionOne, the three
// interfaces), as Debian's install guide does with the openstack CLI; through gophercloud, as the
// rest of the harness talks to the cloud, in the namespace. Nova's and Neutron's internal
// endpoints are at externalGW, where guests reach them (GuestCloudsYAML).
func (c *Cloud) registerCatalog(ctx context.Context) error {
	pc, err := c.Provider(ctx)
	if err != nil {
		return err
	}
	identity, err := openstack.NewIdentityV3(pc, gophercloud.EndpointOpts{})
	if err != nil {
		return err
	}
	for _, s := range []struct {
		typ, name, url string
		guests         bool // internal endpoint at externalGW (netns.go): the cloud controller manager's
	}{
		{"compute", "nova", fmt.Sprintf("http://127.0.0.1:%d/v2.1", novaPort), true},
		{"placement", "placement", fmt.Sprintf("http://127.0.0.1:%d", placementPort), false},
		{"network", "neutron", fmt.Sprintf("http://127.0.0.1:%d", neutronPort), true},
	} {
		svc, err := services.Create(ctx, identity, services.CreateOpts{Type: s.typ, Name: s.name}).Extract()
		if err != nil {
			return fmt.Errorf("registering %s in Keystone's catalog: %w", s.name, err)
		}
		for _, iface := range []gophercloud.Availability{gophercloud.AvailabilityPublic, gophercloud.AvailabilityInternal, gophercloud.AvailabilityAdmin} {
			u := s.url
			if s.guests && iface == gophercloud.AvailabilityInternal {
				u = strings.Replace(u, "127.0.0.1", externalGW, 1)
			}
			opts := endpoints.CreateOpts{Availability: iface, Region: "RegionOne", URL: u, ServiceID: svc.ID}
			if _, err := endpoints.Create(ctx, identity, opts).Extract(); err != nil {
				return fmt.Errorf("registering %s's %s endpoint in Keystone's catalog: %w", s.name, iface, err)
			}
		}
	}
	return nil
}

func (c *Cloud) syncPlacement(ctx context.Context) func() error {
	return func() error {
		err := c.run(ctx, "placement-db-sync", []string{"OS_PLACEMENT_CONFIG_DIR=" + filepath.Join(c.Dir, "placement")},
			python, "/usr/bin/placement-manage", "--config-file", filepath.Join(c.Dir, "placement/placement.conf"), "db", "sync")
		if err != nil {
			return err
		}
		return sqliteWAL(filepath.Join(c.Dir, "placement/placement.sqlite"))
	}
}

// syncNova makes the API database, cell0 and cell1 (sqlite files in Dir/nova).
func (c *Cloud) syncNova(ctx context.Context) func() error {
	return func() error {
		conf := filepath.Join(c.Dir, "nova/nova.conf")
		manage := func(name string, args ...string) error {
			return c.run(ctx, name, nil, append([]string{python, "/usr/bin/nova-manage", "--config-file", conf}, args...)...)
		}
		steps := []func() error{
			func() error { return manage("nova-api-db-sync", "api_db", "sync") },
			func() error {
				return manage("nova-cell0", "cell_v2", "map_cell0", "--database_connection", c.mysqlURL("nova_cell0"))
			},
			func() error { return manage("nova-cell1", "cell_v2", "create_cell", "--name", "cell1") },
			func() error { return manage("nova-db-sync", "db", "sync") },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	}
}

// syncNeutron makes Neutron's database from its models, as Neutron's own functional tests do
// (their test_models_sync keeps the models equal to the migrations), and stamps it migrated to
// the heads: "upgrade heads" runs some 200 migrations, minutes on a loaded 2-core machine. (On
// sqlite the migrations cannot run at all: they ALTER constraints.)
func (c *Cloud) syncNeutron(ctx context.Context) func() error {
	return func() error {
		const create = `import sys, sqlalchemy
from neutron.db.migration.models import head
head.get_metadata().create_all(sqlalchemy.create_engine(sys.argv[1]))
`
		if err := c.run(ctx, "neutron-db-create", nil, python, "-c", create, c.mysqlURL("neutron")); err != nil {
			return err
		}
		return c.run(ctx, "neutron-db-stamp", nil, python, "/usr/bin/neutron-db-manage",
			"--config-file", filepath.Join(c.Dir, "neutron/neutron.conf"),
			"--config-file", filepath.Join(c.Dir, "neutron/ml2_conf.ini"), "stamp", "heads")
	}
}

// sqliteWAL switches a database to write-ahead logging: readers no longer block the writer.
func sqliteWAL(path string) error {
	out, err := exec.Command(python, "-c", `import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("pragma journal_mode=wal")`, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sqlite WAL on %s: %v: %s", path, err, out)
	}
	return nil
}

func parallel(n int, fns []func() error) error {
	sem := make(chan struct{}, n)
	errc := make(chan error, len(fns))
	for _, f := range fns {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errc <- f()
		}()
	}
	var first error
	for range fns {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *Cloud) waitTCP(ctx context.Context, p *proc, host string, port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		conn, err := netns.Dial(ctx, c.Netns, "tcp", fmt.Sprintf("%s:%d", host, port))
		if err == nil {
			conn.Close()
			return nil
		}
		if err := c.exited(p); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s:%d within %s; its log: %s\n%s", p.name, host, port, within, c.logPath(p.name), tail(c.logPath(p.name), 15))
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

func (c *Cloud) waitHTTP(ctx context.Context, p *proc, url string, within time.Duration) error {
	client := c.HTTPClient()
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if err := c.exited(p); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within %s: %v; its log: %s\n%s", p.name, url, within, err, c.logPath(p.name), tail(c.logPath(p.name), 15))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

func (c *Cloud) waitFile(ctx context.Context, p *proc, path string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if err := c.exited(p); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s made no %s within %s; its log: %s\n%s", p.name, path, within, c.logPath(p.name), tail(c.logPath(p.name), 15))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
