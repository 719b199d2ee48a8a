// Package keys holds the OpenPGP public key that signs Flatcar's release artifacts, embedded in the
// binary so verification works offline and cannot be skipped by a missing file.
package keys

import _ "embed"

// FlatcarImageSigning is Flatcar's image signing key (armored), from Flatcar's website sources.
// Primary key F88CFEDEFF29A5B4D9523864E25D9AED0593B34A; its signing subkeys rotate, so trust is
// anchored on the primary key and whatever subkeys it has bound, never on one pinned subkey.
//
//go:embed Flatcar_Image_Signing_Key.asc
var FlatcarImageSigning []byte

// FlatcarFingerprint is the primary key fingerprint the embedded key must carry.
const FlatcarFingerprint = "F88CFEDEFF29A5B4D9523864E25D9AED0593B34A"
