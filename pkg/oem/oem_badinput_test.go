package oem_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// Every bad input: a clear message, the right exit code, and the image byte-identical afterwards.
func TestOEMSetBadInputs(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4")
	dir := t.TempDir()
	good := flatcardisk.Build(t, flatcardisk.Options{})

	notDisk := filepath.Join(dir, "notes.txt")
	os.WriteFile(notDisk, []byte("this is not a disk image\n"), 0o644)

	noOEM := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMNone})

	unknownFS := flatcardisk.Build(t, flatcardisk.Options{})
	zeroRange(t, unknownFS, 0, 1<<20) // wipe the btrfs superblock area at 64 KiB... and more

	corruptBtrfs := flatcardisk.Build(t, flatcardisk.Options{})
	flipByte(t, corruptBtrfs, 0x10000+0x100) // inside the superblock: checksum no longer matches

	corruptExt4 := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMExt4})
	flipByte(t, corruptExt4, 0x400+0x20) // s_blocks_per_group: metadata_csum catches it

	cases := []struct {
		name  string
		image string
		args  []string
		code  int
		want  []string
	}{
		{"missing file", filepath.Join(dir, "nope.raw"), nil, 1, []string{"does not exist"}},
		{"not a disk image", notDisk, nil, 1, []string{"no GPT", "Flatcar"}},
		{"GPT without OEM", noOEM, nil, 1, []string{`no partition named "OEM"`}},
		{"unknown filesystem", unknownFS, nil, 1, []string{"unknown filesystem"}},
		{"corrupt btrfs superblock", corruptBtrfs, nil, 1, []string{"checksum"}},
		{"corrupt ext4 superblock", corruptExt4, nil, 1, []string{"ext4"}},
		{"quote injection", good, []string{"--id", `openstack"`}, 2, []string{"invalid OEM id"}},
		{"dollar injection", good, []string{"--id", "$(reboot)"}, 2, []string{"invalid OEM id"}},
		{"newline injection", good, []string{"--id", "openstack\nset linux_append=x"}, 2, []string{"invalid OEM id"}},
		{"semicolon in args", good, []string{"--id", "openstack", "--linux-append", "a;reboot"}, 2, []string{"invalid kernel argument"}},
		{"backslash in args", good, []string{"--id", "openstack", "--linux-append", `a\"b`}, 2, []string{"invalid kernel argument"}},
		{"quote in args", good, []string{"--id", "openstack", "--linux-append", `x" linux /evil "`}, 2, []string{"invalid kernel argument"}},
		{"unknown id", good, []string{"--id", "openstak"}, 2, []string{"unknown OEM id", "openstack", "--allow-unknown-id"}},
		{"missing --id", good, []string{}, 2, []string{"--id is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before [32]byte
			exists := fileExists(c.image)
			if exists {
				before = fileHash(t, c.image)
			}
			args := c.args
			if args == nil {
				args = []string{"--id", "openstack"}
			}
			testutil.Run(t, append([]string{"oem", "set", c.image}, args...)...).MustFail(t, c.code, c.want...)
			if exists && fileHash(t, c.image) != before {
				t.Fatal("the image changed although the command failed")
			}
		})
	}
	// --allow-unknown-id lets a platform this list lacks through.
	testutil.Run(t, "oem", "set", good, "--id", "mycloud", "--allow-unknown-id").MustSucceed(t)
}

func TestOEMSetReadOnlyImage(t *testing.T) {
	testutil.RequireRoot(t, "dropping privileges with setpriv")
	testutil.RequireTools(t, "setpriv", "mkfs.btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	// Let nobody reach the file: t.TempDir() and its parent are 0700.
	for dir := filepath.Dir(img); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755)
	}
	os.Chmod(img, 0o444)
	before := fileHash(t, img)
	testutil.RunCmd(t, testutil.Cmd{Prefix: testutil.AsNobody, Args: []string{"oem", "set", img, "--id", "openstack"}}).
		MustFail(t, 1, "not writable", "--output-file")
	// Read-only commands still work for that user.
	testutil.RunCmd(t, testutil.Cmd{Prefix: testutil.AsNobody, Args: []string{"oem", "show", img}}).MustSucceed(t)
	if fileHash(t, img) != before {
		t.Fatal("read-only image changed")
	}
}

func TestOEMShowAndInspectBadInputs(t *testing.T) {
	dir := t.TempDir()
	notDisk := filepath.Join(dir, "zero.raw")
	os.WriteFile(notDisk, make([]byte, 1<<20), 0o644)
	testutil.Run(t, "oem", "show", filepath.Join(dir, "nope")).MustFail(t, 1, "does not exist")
	testutil.Run(t, "inspect", notDisk).MustFail(t, 1, "no GPT")
	testutil.Run(t, "inspect").MustFail(t, 2, "IMAGE")
	testutil.Run(t, "inspect", notDisk, "--for", "Bad;Id").MustFail(t, 2, "invalid OEM id")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func flipByte(t *testing.T, image string, offInOEM int64) {
	t.Helper()
	start, _, err := flatcardisk.OEMPartition(image)
	if err != nil {
		t.Fatal(err)
	}
	testutil.FlipByte(t, image, start+offInOEM)
}

func zeroRange(t *testing.T, image string, offInOEM, n int64) {
	t.Helper()
	start, _, _ := flatcardisk.OEMPartition(image)
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteAt(make([]byte, n), start+offInOEM)
}
