// Package digest is the one file hash: the build record's sha256/sha512, the Kubernetes cache
// check, manifests' --sysext sha512 and the tests' hashes all read a file through File.
package digest

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"os"
)

// File returns the hex digest of the file at path under h, and its length.
func File(path string, h hash.Hash) (sum string, n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if n, err = io.Copy(h, f); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// SHA256 is File with sha256.
func SHA256(path string) (string, int64, error) { return File(path, sha256.New()) }

// SHA512 is File with sha512.
func SHA512(path string) (string, int64, error) { return File(path, sha512.New()) }
