package sysext

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Publish's SHA256SUMS is what systemd-sysupdate checks every download against: one
// "sha256  name" line per .raw, sorted, each hash that of the file's bytes (an empty or stale
// SHA256SUMS once passed every other sysext test).
func TestPublishWritesSumsOfEveryRaw(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kubernetes-v1.35.2-x86-64.raw": "the 1.35 sysext",
		"kubernetes-v1.34.4-x86-64.raw": "the 1.34 sysext",
		"tools.raw":                     "another sysext",
	}
	var want []string
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		s256, s512 := sha256.Sum256([]byte(content)), sha512.Sum512([]byte(content))
		want = append(want, hex.EncodeToString(s256[:])+"  "+name+"\n")
		t.Cleanup(func() {
			got, err := os.ReadFile(filepath.Join(dir, name+".sha512"))
			if err != nil || string(got) != hex.EncodeToString(s512[:])+"  "+name+"\n" {
				t.Errorf("%s.sha512 = %q, %v; want the file's sha512 and name", name, got, err)
			}
		})
	}
	p, err := Publish(dir, PublishOptions{URL: "http://10.0.0.5/ext/"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if string(got) != strings.Join(want, "") {
		t.Errorf("SHA256SUMS =\n%s\nwant\n%s", got, strings.Join(want, ""))
	}
	if len(p.Sysexts) != len(files) || p.URL != "http://10.0.0.5/ext" || p.Verify {
		t.Errorf("Published = %+v; want %d sysexts at the URL without its slash, unsigned", p, len(files))
	}
	// Every transfer as .transfer (systemd >= 257) and .conf (systemd 255, Flatcar LTS), the same bytes.
	wantTransfers := []string{"kubernetes-1.34.conf", "kubernetes-1.35.conf",
		filepath.Join(transferDir, "kubernetes-v1.34.conf"), filepath.Join(transferDir, "kubernetes-v1.34.transfer"),
		filepath.Join(transferDir, "kubernetes-v1.35.conf"), filepath.Join(transferDir, "kubernetes-v1.35.transfer"),
		"noop.conf", "noop.transfer"}
	if strings.Join(p.Transfers, ",") != strings.Join(wantTransfers, ",") {
		t.Errorf("Transfers = %q, want %q", p.Transfers, wantTransfers)
	}
	for _, base := range []string{filepath.Join(transferDir, "kubernetes-v1.35"), "noop"} {
		conf, err1 := os.ReadFile(filepath.Join(dir, base+".conf"))
		transfer, err2 := os.ReadFile(filepath.Join(dir, base+".transfer"))
		if err1 != nil || err2 != nil || string(conf) != string(transfer) || !strings.Contains(string(conf), "[Source]") {
			t.Errorf("%s.transfer and .conf differ or are missing: %v %v\n%s\n%s", base, err1, err2, transfer, conf)
		}
	}
}
