package images

import (
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// registerLogins registers with redact every credential the docker config holds for hosts
// (password, auth, identity and registry tokens), so that a registry or proxy echoing the
// Authorization header, plain or base64, gets none of them into a message.
func registerLogins(hosts []string) {
	for _, h := range hosts {
		reg, err := name.NewRegistry(h, name.Insecure)
		if err != nil {
			continue
		}
		a, err := authn.DefaultKeychain.Resolve(reg)
		if err != nil {
			continue
		}
		cfg, err := a.Authorization()
		if err != nil || cfg == nil {
			continue
		}
		for _, s := range []string{cfg.Password, cfg.Auth, cfg.IdentityToken, cfg.RegistryToken} {
			redact.Secret(s) // and its encodings
		}
	}
}
