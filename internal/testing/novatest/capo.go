package novatest

import "fmt"

// AdminCloudsYAML is a clouds.yaml with one cloud, name, the admin of Keystone's bootstrap in
// RegionOne: what a user gives CAPO (the identityRef Secret of `manifests`, which ORC reads too).
// The URLs are the namespace's loopback, so only a process in Netns can use it.
func (c *Cloud) AdminCloudsYAML(name string) []byte {
	return cloudsYAML(name, c.keystone, c.password, "public")
}

// GuestCloudsYAML is AdminCloudsYAML as a guest uses it (a workload cluster's cloud controller
// manager): Keystone at the namespace's address on the external network, which guests reach
// through their router, and the catalog's internal endpoints, which are there too (netns.go).
func (c *Cloud) GuestCloudsYAML(name string) []byte {
	return cloudsYAML(name, "http://"+externalGW+":"+c.keystonePort, c.password, "internal")
}

func cloudsYAML(name, keystone, password, iface string) []byte {
	return fmt.Appendf(nil, `clouds:
  %s:
    auth:
      auth_url: %s/v3
      username: admin
      password: %q
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
    interface: %s
`, name, keystone, password, iface)
}
