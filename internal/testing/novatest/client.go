package novatest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
)

// Provider is an authenticated admin client whose connections are made in the namespace; one
// token serves every poll (the openstack CLI takes seconds per call on a loaded machine).
func (c *Cloud) Provider(ctx context.Context) (*gophercloud.ProviderClient, error) {
	pc, err := openstack.NewClient(c.keystone + "/v3")
	if err != nil {
		return nil, err
	}
	pc.HTTPClient = *c.HTTPClient()
	err = openstack.Authenticate(ctx, pc, gophercloud.AuthOptions{
		IdentityEndpoint: c.keystone + "/v3", Username: "admin", Password: c.password, DomainID: "default",
		Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainID: "default"}, AllowReauth: true})
	if err != nil {
		return nil, fmt.Errorf("authenticating to Keystone in %s: %w", c.Netns, err)
	}
	return pc, nil
}

// Compute and Network are the Nova and Neutron clients of the catalog's RegionOne.
func (c *Cloud) Compute(pc *gophercloud.ProviderClient) (*gophercloud.ServiceClient, error) {
	return openstack.NewComputeV2(pc, gophercloud.EndpointOpts{Region: "RegionOne"})
}

func (c *Cloud) Network(pc *gophercloud.ProviderClient) (*gophercloud.ServiceClient, error) {
	return openstack.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: "RegionOne"})
}

// waitReady waits until Nova lists an up hypervisor (the compute host is mapped to cell1) and
// Neutron lists the four agents alive; any daemon exiting fails it.
func (c *Cloud) waitReady(ctx context.Context, watch []*proc, within time.Duration) error {
	deadline := time.Now().Add(within)
	pc, err := c.Provider(ctx)
	if err != nil {
		return err
	}
	nova, err := c.Compute(pc)
	if err != nil {
		return err
	}
	neutron, err := c.Network(pc)
	if err != nil {
		return err
	}
	var last string
	for {
		for _, p := range watch {
			if err := c.exited(p); err != nil {
				return err
			}
		}
		up, alive := 0, map[string]bool{}
		var errs []string
		if page, err := hypervisors.List(nova, nil).AllPages(ctx); err != nil {
			errs = append(errs, err.Error())
		} else if hs, err := hypervisors.ExtractHypervisors(page); err == nil {
			for _, h := range hs {
				if h.State == "up" && h.Status == "enabled" {
					up++
				}
			}
		}
		if page, err := agents.List(neutron, agents.ListOpts{}).AllPages(ctx); err != nil {
			errs = append(errs, err.Error())
		} else if as, err := agents.ExtractAgents(page); err == nil {
			for _, a := range as {
				if a.Alive {
					alive[a.AgentType] = true
				}
			}
		}
		if up > 0 && len(alive) >= 4 {
			return nil
		}
		last = fmt.Sprintf("%d hypervisors up, agents alive: %v %s", up, alive, strings.Join(errs, "; "))
		if time.Now().After(deadline) {
			return fmt.Errorf("the compute host or the agents are not up within %s: %s; logs in %s", within, last, c.LogDir)
		}
		if err := sleep(ctx, 3*time.Second); err != nil {
			return err
		}
	}
}
