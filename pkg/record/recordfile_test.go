package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

func TestRecordFileRejectsWhatIsNoRecord(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := write("big.build.json", "")
	os.Truncate(big, 200<<20) // sparse: a 200 MB "record" used to be read whole and refused with ": <nil>"
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.build.json"): "--from-record " + filepath.Join(dir, "missing.build.json") + " does not exist",
		write("broken.build.json", "{"):          "is not a build record",
		write("other.json", `{"kind":"x"}`):      "is not a build record (the .build.json next to a built image): it has no imageName",
		big:                                      "is 200 MiB, more than a build record (JSON) can be (at most 4 MiB)",
		"/dev/zero":                              "--from-record /dev/zero is a character device, not a build record",
	} {
		if _, err := ReadFlag(path); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "<nil>") {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	r, err := ReadFlag(write("ok.build.json", `{"imageName":"flatcar-stable"}`))
	if err != nil || r.ImageName != "flatcar-stable" {
		t.Errorf("%+v %v", r, err)
	}
}
