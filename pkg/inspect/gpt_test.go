package inspect

import (
	"os"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// A zeroed primary GPT header: inspect still reads the partitions (from the backup header) and
// says so with a warning instead of falling back silently.
func TestInspectWarnsWhenTheGPTCameFromTheBackup(t *testing.T) {
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, GrubCfg: "set oem_id=\"qemu\"\n"})
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 512), 512)
	f.Close()
	r := testutil.Run(t, "inspect", img, "--for", "qemu").MustSucceed(t)
	if out := r.Combined(); !strings.Contains(out, "WARNING") || !strings.Contains(out, "primary GPT header is damaged") || !strings.Contains(out, "OEM") {
		t.Fatalf("inspect on an image with a zeroed primary GPT header:\n%s", out)
	}
}
