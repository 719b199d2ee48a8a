package testutil

import (
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
)

// SHA256File is the hex sha256 of the file at p; a read error fails the test.
func SHA256File(t testing.TB, p string) string { t.Helper(); return must(t, digest.SHA256, p) }

// SHA512File is the hex sha512 of the file at p; a read error fails the test.
func SHA512File(t testing.TB, p string) string { t.Helper(); return must(t, digest.SHA512, p) }

func must(t testing.TB, sum func(string) (string, int64, error), p string) string {
	t.Helper()
	s, _, err := sum(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
