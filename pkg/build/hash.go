package build

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"os"
)

func sha256File(p string) (string, int64, error) { return hashFile(p, sha256.New()) }
func sha512File(p string) (string, int64, error) { return hashFile(p, sha512.New()) }

func hashFile(p string, h hash.Hash) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
