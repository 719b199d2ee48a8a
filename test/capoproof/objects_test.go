package capoproof_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
)

// The fields of CAPO's (infrastructure v1beta1) and CAPI's (v1beta2) objects the test reads.
type ref struct{ ID, Name string }

type openStackCluster struct {
	Spec struct {
		ControlPlaneEndpoint struct {
			Host string
			Port int
		}
	}
	Status struct {
		Ready   bool
		Network struct {
			ID, Name string
			Subnets  []ref
		}
		Router                    ref
		ControlPlaneSecurityGroup ref
		WorkerSecurityGroup       ref
		FailureMessage            string
		Conditions                []condition
	}
}

type condition struct{ Type, Status, Reason, Message string }

type openStackMachine struct {
	Metadata struct{ Name string }
	Spec     struct{ ProviderID string }
	Status   struct {
		Ready          bool
		InstanceState  string
		Addresses      []struct{ Type, Address string }
		FailureMessage string
		Conditions     []condition
	}
}

type machine struct {
	Metadata struct {
		Name   string
		Labels map[string]string
	}
	Spec struct {
		ProviderID string
		Bootstrap  struct {
			DataSecretName string
			ConfigRef      struct{ Name string }
		}
		InfrastructureRef struct{ Name string }
	}
	Status struct {
		Phase     string
		Addresses []struct{ Type, Address string }
		NodeRef   struct{ Name string }
	}
	infra openStackMachine
}

func (m machine) controlPlane() bool {
	_, ok := m.Metadata.Labels["cluster.x-k8s.io/control-plane"]
	return ok
}

// watch reads the management side's objects.
type watch struct {
	t *testing.T
	m *capitest.Management
}

func (w *watch) get(what string, v any) {
	w.t.Helper()
	out, err := w.m.Kubectl("get", "-n", "default", what, "-o", "json")
	if err != nil {
		w.t.Fatalf("kubectl get %s: %v\n%s", what, err, out)
	}
	decode(w.t, what, []byte(out), v)
}

// machines are the cluster's Machines, each with its OpenStackMachine once there is one.
func (w *watch) machines() []machine {
	var l struct{ Items []machine }
	w.get("machines.v1beta2.cluster.x-k8s.io", &l)
	for i, m := range l.Items {
		if m.Spec.InfrastructureRef.Name == "" {
			continue
		}
		out, err := w.m.Kubectl("get", "-n", "default", "openstackmachines.infrastructure.cluster.x-k8s.io/"+m.Spec.InfrastructureRef.Name, "-o", "json")
		if err == nil {
			decode(w.t, "openstackmachine", []byte(out), &l.Items[i].infra)
		}
	}
	return l.Items
}

// bootstrapData is the value of the bootstrap data Secret CABPK wrote for m.
func (w *watch) bootstrapData(m machine) []byte {
	var s struct{ Data struct{ Value []byte } }
	w.get("secret/"+m.Spec.Bootstrap.DataSecretName, &s)
	return s.Data.Value
}

// failure is what CAPO reports as a terminal failure, if anything.
func (w *watch) failure(c openStackCluster, ms []machine) string {
	if c.Status.FailureMessage != "" {
		return "OpenStackCluster: " + c.Status.FailureMessage
	}
	for _, m := range ms {
		if m.infra.Status.FailureMessage != "" {
			return "OpenStackMachine " + m.infra.Metadata.Name + ": " + m.infra.Status.FailureMessage
		}
		if m.infra.Status.InstanceState == "ERROR" {
			return "OpenStackMachine " + m.infra.Metadata.Name + ": the server is in ERROR"
		}
	}
	return ""
}

// describe is the objects and their false conditions, and the ends of the managers' logs.
func (w *watch) describe() string {
	out, _ := w.m.Kubectl("get", "-n", "default", "clusters,openstackclusters,kubeadmcontrolplanes,machines,openstackmachines,openstackservers,images.openstack.k-orc.cloud", "-o", "wide")
	conds, _ := w.m.Kubectl("get", "-n", "default", "openstackclusters,openstackmachines,openstackservers,images.openstack.k-orc.cloud,machines.v1beta2.cluster.x-k8s.io", "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name}:{range .status.conditions[?(@.status!="True")]} {.type}={.status} {.reason} {.message};{end}{"\n"}{end}`)
	return out + "\n" + conds + "\nthe managers' logs: " + w.m.Dir
}

// openStack reads what CAPO made, through the admin's clients in the cloud's namespace.
type openStack struct {
	t             *testing.T
	ctx           context.Context
	nova, neutron *gophercloud.ServiceClient
}

func newOpenStack(t *testing.T, ctx context.Context, c *novatest.Cloud) *openStack {
	pc, err := c.Provider(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := &openStack{t: t, ctx: ctx}
	if o.nova, err = c.Compute(pc); err != nil {
		t.Fatal(err)
	}
	o.nova.Microversion = "2.3" // user_data (OS-EXT-SRV-ATTR, admin), flavor by ID
	if o.neutron, err = c.Network(pc); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *openStack) network(id string) *networks.Network {
	n, err := networks.Get(o.ctx, o.neutron, id).Extract()
	if err != nil {
		o.t.Fatalf("CAPO's network %q: %v", id, err)
	}
	return n
}

func (o *openStack) subnet(id string) *subnets.Subnet {
	s, err := subnets.Get(o.ctx, o.neutron, id).Extract()
	if err != nil {
		o.t.Fatalf("CAPO's subnet %q: %v", id, err)
	}
	return s
}

func (o *openStack) router(id string) *routers.Router {
	r, err := routers.Get(o.ctx, o.neutron, id).Extract()
	if err != nil {
		o.t.Fatalf("CAPO's router %q: %v", id, err)
	}
	return r
}

func (o *openStack) floatingIP(addr string) floatingips.FloatingIP {
	page, err := floatingips.List(o.neutron, floatingips.ListOpts{FloatingIP: addr}).AllPages(o.ctx)
	if err != nil {
		o.t.Fatal(err)
	}
	l, err := floatingips.ExtractFloatingIPs(page)
	if err != nil || len(l) != 1 {
		o.t.Fatalf("the API server's floating IP %s: %v %v", addr, l, err)
	}
	return l[0]
}

func (o *openStack) ports(deviceID string) []ports.Port {
	page, err := ports.List(o.neutron, ports.ListOpts{DeviceID: deviceID}).AllPages(o.ctx)
	if err != nil {
		o.t.Fatal(err)
	}
	l, err := ports.ExtractPorts(page)
	if err != nil {
		o.t.Fatal(err)
	}
	return l
}

// server is a Nova server as the admin reads it at microversion 2.3.
type server struct {
	ID, Name, Status string
	Image            map[string]any
	Flavor           map[string]any
	KeyName          string    `json:"key_name"`
	UserData         string    `json:"OS-EXT-SRV-ATTR:user_data"`
	CreatedText      string    `json:"created"`
	LaunchedText     string    `json:"OS-SRV-USG:launched_at"`
	Created          time.Time `json:"-"`
	LaunchedAt       time.Time `json:"-"`
}

func (o *openStack) server(id string) server {
	var s server
	if err := servers.Get(o.ctx, o.nova, id).ExtractInto(&s); err != nil {
		o.t.Fatalf("server %s: %v", id, err)
	}
	var err error
	if s.Created, err = time.Parse(time.RFC3339, s.CreatedText); err != nil {
		o.t.Errorf("server %s created %q: %v", id, s.CreatedText, err)
	}
	if s.LaunchedAt, err = time.Parse("2006-01-02T15:04:05.999999", strings.TrimSuffix(s.LaunchedText, "Z")); err != nil {
		o.t.Errorf("server %s launched_at %q: %v", id, s.LaunchedText, err)
	}
	return s
}
