package build

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
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.build.json"): "--from-record: ",
		write("broken.build.json", "{"):          "is not a build record",
		write("other.json", `{"kind":"x"}`):      "is not a build record",
	} {
		if _, err := RecordFile(path); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	r, err := RecordFile(write("ok.build.json", `{"imageName":"flatcar-stable"}`))
	if err != nil || r.ImageName != "flatcar-stable" {
		t.Errorf("%+v %v", r, err)
	}
}
