package cli

import (
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// signFlags are --sign-key, --sign-cert-uuid and --sign-cert, which `upload` and `build` share.
type signFlags struct{ key, certUUID, cert string }

func (s *signFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.key, "sign-key", "", "PEM private key (RSA, or ECDSA P-384/P-521 for Glance; a cosign key file with $COSIGN_PASSWORD) that signs the image for Glance's signature verification (img_signature*) and writes cosign-compatible .sig files; keep it 0600")
	f.StringVar(&s.certUUID, "sign-cert-uuid", "", "UUID of the --sign-key's X.509 certificate in the cloud's Barbican (img_signature_certificate_uuid)")
	f.StringVar(&s.cert, "sign-cert", "", "PEM X.509 certificate of --sign-key, stored in each cloud's Barbican (reused when already there) instead of --sign-cert-uuid")
}

// signing reads the key and certificate; nil without --sign-key. withGlance: the image goes to
// Glance, so a certificate is required.
func (s *signFlags) signing(withGlance bool) (*signing.Key, *glance.Signing, error) {
	if s.key == "" {
		if s.certUUID != "" || s.cert != "" {
			return nil, nil, errs.Invalidf("--sign-cert-uuid and --sign-cert need --sign-key, the private key that signs")
		}
		return nil, nil, nil
	}
	key, err := signing.LoadKey(s.key)
	if err != nil {
		return nil, nil, err
	}
	if !withGlance {
		if s.certUUID != "" || s.cert != "" {
			return nil, nil, errs.Invalidf("--sign-cert-uuid and --sign-cert are for Glance: give --cloud too, or leave them out to write only the .sig files")
		}
		return key, nil, nil
	}
	g := &glance.Signing{Key: key, CertUUID: s.certUUID, CertPath: s.cert}
	if s.cert != "" {
		if g.Cert, err = signing.LoadCertificate(s.cert); err != nil {
			return nil, nil, err
		}
	}
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	return key, g, nil
}
