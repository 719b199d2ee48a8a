package oem_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// randomArgs makes n bytes of kernel arguments that zlib cannot shrink much (base64-like words).
func randomArgs(r *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var b strings.Builder
	for b.Len()+50 <= n { // a word is at most 49 bytes with its space
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "k%d=", r.Intn(1e6))
		for range 40 {
			b.WriteByte(alphabet[r.Intn(len(alphabet))])
		}
	}
	return b.String()
}

// A grub.cfg grown past what btrfs can hold inline is refused with a message that says so and
// what to do, not "unsupported btrfs layout"; the image is left as it was (btrfs check clean).
func TestOEMSetBtrfsGrubCfgTooLargeSaysWhatToDo(t *testing.T) {
	testutil.RequireTools(t, "btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMBtrfs})
	r := rand.New(rand.NewSource(1))
	// Each run may add up to 1024 bytes of arguments, and they accumulate: a few runs overflow.
	for run := 1; run <= 8; run++ {
		before := fileHash(t, img)
		res := testutil.Run(t, "oem", "set", img, "--id", "openstack", "--linux-append", randomArgs(r, 1000))
		if res.Code == 0 {
			continue
		}
		res.MustFail(t, 1, "does not fit in the btrfs OEM partition", "grub.cfg", "Shorten --linux-append", "Nothing was written")
		if strings.Contains(res.Stderr, "unsupported btrfs layout") {
			t.Fatalf("the message still blames the layout:\n%s", res.Stderr)
		}
		if fileHash(t, img) != before {
			t.Fatal("the refused edit changed the image")
		}
		checkFilesystem(t, flatcardisk.OEMBtrfs, img)
		t.Logf("refused on run %d: %s", run, res.Stderr)
		return
	}
	t.Fatal("8 runs of 1000 bytes of kernel arguments each all fitted in an inline grub.cfg")
}
