package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A compressed or foreign file given to any command that opens an image is refused with the
// fix, exit 1, and nothing is written: no output, no temporary file, the input unchanged.
func TestEveryImageCommandRefusesCompressedInput(t *testing.T) {
	inputs := []struct {
		name string
		data []byte
		want string
	}{
		{"flatcar.img.bz2", append([]byte("BZh91AY&SY"), make([]byte, 4086)...), "lbzip2 -dk"},
		{"flatcar.img.gz", append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, 4092)...), "gunzip -k"},
		{"flatcar.img.xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 4090)...), "unxz -k"},
		{"flatcar.img.zst", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 4092)...), "unzstd"},
		{"flatcar.vmdk", append([]byte("KDMV"), make([]byte, 4092)...), "qemu-img convert"},
	}
	commands := []struct {
		name string
		args func(in, dir string) []string
	}{
		{"convert", func(in, dir string) []string { return []string{"convert", in, filepath.Join(dir, "out.qcow2")} }},
		{"oem set in place", func(in, dir string) []string { return []string{"oem", "set", in, "--id", "openstack"} }},
		{"oem set copy", func(in, dir string) []string {
			return []string{"oem", "set", in, "--id", "openstack", "--output-file", filepath.Join(dir, "out.raw")}
		}},
		{"oem show", func(in, dir string) []string { return []string{"oem", "show", in} }},
		{"inspect", func(in, dir string) []string { return []string{"inspect", in} }},
		// No cloud exists: the file is refused before any connection is tried.
		{"upload", func(in, dir string) []string { return []string{"upload", in, "--name", "x", "--cloud", "none"} }},
	}
	for _, c := range commands {
		for _, in := range inputs {
			t.Run(c.name+"/"+in.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				path := filepath.Join(dir, in.name)
				if err := os.WriteFile(path, in.data, 0o644); err != nil {
					t.Fatal(err)
				}
				r := testutil.RunCmd(t, testutil.Cmd{Args: c.args(path, dir),
					Env: []string{"OS_CLIENT_CONFIG_FILE=" + filepath.Join(dir, "none.yaml")}})
				r.MustFail(t, 1, path, "not a qcow2 or raw disk image", in.want)
				entries, _ := os.ReadDir(dir)
				if len(entries) != 1 {
					t.Fatalf("files left in the directory: %v", entries)
				}
				if got, _ := os.ReadFile(path); !bytes.Equal(got, in.data) {
					t.Fatal("the input was modified")
				}
			})
		}
	}
}
