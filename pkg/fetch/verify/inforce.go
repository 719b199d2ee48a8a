package verify

import "fmt"

// KeyringInForce is the keyring --keyring and --insecure-skip-verify give: path's (it
// replaces the embedded Flatcar key), else the embedded one; nil when insecure.
func KeyringInForce(path string, insecure bool) (*Keyring, error) {
	if insecure {
		return nil, nil
	}
	var k *Keyring
	var err error
	if path != "" {
		k, err = LoadKeyring(path)
	} else {
		k, err = EmbeddedKeyring()
	}
	if err != nil {
		return nil, fmt.Errorf("--keyring: %w", err)
	}
	return k, nil
}
