package novatest

import "fmt"

// AdminCloudsYAML is a clouds.yaml with one cloud, name, the admin of Keystone's bootstrap in
// RegionOne: what a user gives CAPO (the identityRef Secret of `manifests`, which ORC reads too).
// The URLs are the namespace's loopback, so only a process in Netns can use it.
func (c *Cloud) AdminCloudsYAML(name string) []byte {
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
    interface: public
`, name, c.keystone, c.password)
}
