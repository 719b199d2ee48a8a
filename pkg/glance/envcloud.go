package glance

import (
	"os"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// envCloudYAML turns the OS_* variables of an openrc file into a one-cloud clouds.yaml document,
// so that both ways of configuring credentials go through the same parser. gophercloud's own
// AuthOptionsFromEnv ignores OS_USER_DOMAIN_NAME and OS_PROJECT_DOMAIN_NAME, which every
// Keystone v3 openrc sets.
func envCloudYAML() (string, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	auth := clouds.AuthInfo{
		AuthURL:                     env("OS_AUTH_URL"),
		Token:                       env("OS_TOKEN"),
		Username:                    env("OS_USERNAME"),
		UserID:                      env("OS_USER_ID"),
		Password:                    env("OS_PASSWORD"),
		ApplicationCredentialID:     env("OS_APPLICATION_CREDENTIAL_ID"),
		ApplicationCredentialName:   env("OS_APPLICATION_CREDENTIAL_NAME"),
		ApplicationCredentialSecret: env("OS_APPLICATION_CREDENTIAL_SECRET"),
		SystemScope:                 env("OS_SYSTEM_SCOPE"),
		ProjectName:                 env("OS_PROJECT_NAME", "OS_TENANT_NAME"),
		ProjectID:                   env("OS_PROJECT_ID", "OS_TENANT_ID"),
		UserDomainName:              env("OS_USER_DOMAIN_NAME"),
		UserDomainID:                env("OS_USER_DOMAIN_ID"),
		ProjectDomainName:           env("OS_PROJECT_DOMAIN_NAME"),
		ProjectDomainID:             env("OS_PROJECT_DOMAIN_ID"),
		DomainName:                  env("OS_DOMAIN_NAME"),
		DomainID:                    env("OS_DOMAIN_ID"),
		TrustID:                     env("OS_TRUST_ID"),
	}
	if auth.AuthURL == "" {
		return "", errs.Invalidf("no cloud given: pass --cloud NAME (an entry of clouds.yaml), set OS_CLOUD, or source an openrc file that sets OS_AUTH_URL and the credentials")
	}
	cloud := clouds.Cloud{
		AuthInfo:   &auth,
		AuthType:   clouds.AuthType(env("OS_AUTH_TYPE")),
		CACertFile: env("OS_CACERT"),
	}
	// Application credentials carry their own scope; Keystone refuses one given next to them.
	if auth.ApplicationCredentialID != "" || auth.ApplicationCredentialName != "" {
		auth.ProjectName, auth.ProjectID, auth.ProjectDomainName, auth.ProjectDomainID = "", "", "", ""
	}
	switch strings.ToLower(env("OS_INSECURE")) {
	case "1", "true", "yes":
		f := false
		cloud.Verify = &f
	}
	doc, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{"env": cloud}})
	if err != nil {
		return "", err
	}
	return string(doc), nil
}
