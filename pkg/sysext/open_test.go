package sysext

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// badSysext makes a squashfs with mksquashfs from files (path -> content).
func badSysext(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return mksquashfs(t, root, filepath.Join(dir, name), "-comp", "gzip")
}

// Images made by the real mksquashfs that systemd-sysext would refuse, each refused with the
// reason and the fix; and a good one, to show the checks are not simply failing everything.
func TestOpenValidatesBakeryLayouts(t *testing.T) {
	testutil.RequireTools(t, "mksquashfs")
	kubelet := map[string]string{"usr/bin/kubelet": "#!/bin/sh\n"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"usr/bin/kubelet": "#!/bin/sh\n"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		file, name string
		files      map[string]string
		want       []string // empty: valid
	}{
		{"kubernetes.raw", "kubernetes", with(map[string]string{ReleasePath("kubernetes"): "ID=_any\nARCHITECTURE=x86-64\n"}), nil},
		{"kubernetes-v1.33.4-x86-64.raw", "", with(map[string]string{ReleasePath("kubernetes"): "ID=_any\n"}), nil},
		{"kubernetes.raw", "kubernetes", kubelet, []string{"has no usr/lib/extension-release.d/extension-release.* file", "systemd-sysext ignores it"}},
		{"kubernetes.raw", "kubernetes", with(map[string]string{ReleasePath("docker"): "ID=_any\n"}),
			[]string{"linked as kubernetes.raw it needs usr/lib/extension-release.d/extension-release.kubernetes", "it carries extension-release.docker", "link it as docker.raw"}},
		{"kubernetes.raw", "kubernetes", with(map[string]string{ReleasePath("kubernetes"): "ID=_any\n", "usr/lib/os-release": "ID=flatcar\n"}), []string{"ships usr/lib/os-release"}},
		{"kubernetes.raw", "kubernetes", with(map[string]string{ReleasePath("kubernetes"): "ID=\"_any\n"}), []string{"does not parse", "unterminated"}},
	}
	for _, c := range cases {
		img := badSysext(t, c.file, c.files)
		info, err := Open(img)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		name := c.name
		if name == "" {
			name = info.DefaultName()
		}
		err = info.Validate(name)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", c.files, err)
			}
			if ok, why := info.WouldMerge(name, FlatcarHost("amd64")); !ok {
				t.Errorf("%v: would not merge: %s", c.files, why)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: accepted", c.files)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", c.files, err, w)
			}
		}
		if _, err := Check(img, name, FlatcarHost("amd64")); err == nil {
			t.Errorf("%v: Check accepted it", c.files)
		}
	}
}

// Truncated, corrupt and foreign files are refused with what is wrong, never a panic.
func TestOpenRefusesDamagedImages(t *testing.T) {
	testutil.RequireTools(t, "mksquashfs")
	good := badSysext(t, "kubernetes.raw", map[string]string{
		"usr/bin/kubelet": strings.Repeat("kubelet binary ", 100000), ReleasePath("kubernetes"): "ID=_any\n"})
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The data blocks follow the superblock; overwrite some of them.
	corrupt := append([]byte{}, data...)
	for i := 200; i < 2000; i++ {
		corrupt[i] ^= 0x5a
	}
	// The metadata tables are at the end: damage the last blocks but keep the size.
	corruptMeta := append([]byte{}, data...)
	for i := len(data) - 700; i < len(data)-100; i++ {
		corruptMeta[i] = 0xff
	}
	for _, c := range []struct {
		name, path string
		want       string
		verify     bool
	}{
		{"truncated", write("truncated.raw", data[:len(data)/2]), "truncated squashfs", false},
		{"truncated superblock", write("tiny.raw", data[:50]), "smaller than a superblock", false},
		{"empty", write("empty.raw", nil), "smaller than a superblock", false},
		{"not squashfs", write("ext4.raw", make([]byte, 8192)), "not a squashfs image", false},
		{"corrupt metadata", write("meta.raw", corruptMeta), "corrupt squashfs", false},
		{"corrupt data", write("data.raw", corrupt), "corrupt squashfs data", true},
	} {
		info, err := Open(c.path)
		if err == nil && c.verify {
			err = info.Verify()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if _, err := Check(c.path, "kubernetes", FlatcarHost("")); err == nil {
			t.Errorf("%s: Check accepted it", c.name)
		}
	}
	if _, err := Check(good, "kubernetes", FlatcarHost("")); err != nil {
		t.Errorf("the undamaged image: %v", err)
	}
}
