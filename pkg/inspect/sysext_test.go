package inspect

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// makeSysext writes a small sysext named name with the given extension-release into dir.
func makeSysext(t *testing.T, dir, file, name string, rel sysext.Release) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubelet")
	os.WriteFile(bin, []byte("#!/bin/sh\necho kubelet\n"), 0o755)
	p := filepath.Join(dir, file)
	os.MkdirAll(filepath.Dir(p), 0o755)
	_, err := sysext.Create(context.Background(), sysext.Spec{Name: name, Release: rel,
		Files: []sysext.File{{Path: "usr/bin/kubelet", Mode: 0o755, Source: bin}}}, p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// usrImage is an ext4 USR-A (the test stand-in's; Flatcar's is btrfs) holding lib/os-release.
func usrImage(t *testing.T, osRelease string) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tree", "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "tree", "lib", "os-release"), []byte(osRelease), 0o644)
	img := filepath.Join(dir, "usr.ext4")
	testutil.MustRun(t, "mkfs.ext4", "-q", "-F", "-L", "USR-A", "-d", filepath.Join(dir, "tree"), img, "8M")
	return img
}

type inspectJSON struct {
	Verdict    string
	Findings   []Finding
	Extensions struct {
		Root   string
		Host   sysext.Host
		Links  []ExtensionLink
		Stored []StoredExtension
	}
}

func inspectImage(t *testing.T, img string, code int) inspectJSON {
	t.Helper()
	r := testutil.Run(t, "inspect", img, "-o", "json")
	if r.Code != code {
		t.Fatalf("inspect exit %d, want %d\n%s", r.Code, code, r.Combined())
	}
	var rep inspectJSON
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal([]byte(r.Stdout), &v)
	checkShape(t, "report", v, reportShape)
	return rep
}

// A baked image: /etc/extensions/kubernetes.raw -> the versioned image under /opt, judged
// against the os-release read from USR-A.
func TestInspectBakedSysext(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4")
	tree := t.TempDir()
	makeSysext(t, tree, "opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw", "kubernetes",
		sysext.Release{"ID": "flatcar", "SYSEXT_LEVEL": "1.0", "ARCHITECTURE": "x86-64"})
	os.MkdirAll(filepath.Join(tree, "etc", "extensions"), 0o755)
	os.Symlink("/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw", filepath.Join(tree, "etc", "extensions", "kubernetes.raw"))
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, RootTree: tree,
		USRAImage: usrImage(t, "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION_ID=4459.2.0\nSYSEXT_LEVEL=1.0\n")})
	rep := inspectImage(t, img, 0)
	x := rep.Extensions
	if x.Root != "ext4" || !strings.HasPrefix(x.Host.Source, "/usr/lib/os-release on USR-A") || x.Host.VersionID != "4459.2.0" {
		t.Fatalf("extensions: %+v", x)
	}
	if len(x.Links) != 1 || !x.Links[0].WouldMerge || x.Links[0].Resolved != "/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw" ||
		x.Links[0].ExtensionRelease["SYSEXT_LEVEL"] != "1.0" || !strings.Contains(x.Links[0].Reason, "SYSEXT_LEVEL=1.0 match") {
		t.Fatalf("links: %+v", x.Links)
	}
	if len(x.Stored) != 1 || !x.Stored[0].Linked {
		t.Fatalf("stored: %+v", x.Stored)
	}
	txt := testutil.Run(t, "inspect", img).MustSucceed(t).Stdout
	if !strings.Contains(txt, "/etc/extensions/kubernetes.raw -> /opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw") || !strings.Contains(txt, "would merge") {
		t.Errorf("text report:\n%s", txt)
	}
}

// Dangling, misnamed and incompatible entries make the image NOT READY, each with its code;
// without a readable os-release on USR-A the judgement uses Flatcar's constants and says so.
func TestInspectBrokenSysexts(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4")
	tree := t.TempDir()
	k8s := "/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw"
	makeSysext(t, tree, k8s, "kubernetes", sysext.Release{"ID": "_any", "ARCHITECTURE": "x86-64"})
	makeSysext(t, tree, "opt/extensions/next/next-2.raw", "next", sysext.Release{"ID": "flatcar", "SYSEXT_LEVEL": "2.0"})
	makeSysext(t, tree, "opt/extensions/stray.raw", "stray", sysext.Release{"ID": "_any"})
	ext := filepath.Join(tree, "etc", "extensions")
	os.MkdirAll(ext, 0o755)
	os.Symlink("/opt/extensions/kubernetes/kubernetes-v1.34.0-x86-64.raw", filepath.Join(ext, "dangling.raw"))
	os.Symlink("../../"+strings.TrimPrefix(k8s, "/"), filepath.Join(ext, "k8s.raw")) // relative link, wrong name
	os.Symlink("/opt/extensions/next/next-2.raw", filepath.Join(ext, "next.raw"))
	os.WriteFile(filepath.Join(ext, "README"), []byte("not an extension"), 0o644)
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, RootTree: tree})
	rep := inspectImage(t, img, 1)
	if rep.Verdict != NotReady || !strings.HasPrefix(rep.Extensions.Host.Source, "Flatcar's constants") {
		t.Fatalf("verdict %s, host %+v", rep.Verdict, rep.Extensions.Host)
	}
	codes := map[string]string{}
	for _, f := range rep.Findings {
		codes[f.Code] = f.Message
	}
	for code, words := range map[string][]string{
		"sysext-link-dangling": {"/etc/extensions/dangling.raw", "kubernetes-v1.34.0-x86-64.raw", "does not exist in ROOT"},
		"sysext-name-mismatch": {"/etc/extensions/k8s.raw", "extension-release.kubernetes", "link it as kubernetes.raw"},
		"sysext-incompatible":  {"/etc/extensions/next.raw", "SYSEXT_LEVEL=2.0, but the host has SYSEXT_LEVEL=1.0", "Flatcar's constants"},
	} {
		for _, w := range words {
			if !strings.Contains(codes[code], w) {
				t.Errorf("%s: %q lacks %q", code, codes[code], w)
			}
		}
	}
	if n := len(rep.Extensions.Links); n != 3 {
		t.Errorf("%d links, want 3 (README is not an extension): %+v", n, rep.Extensions.Links)
	}
	var unlinked []string
	for _, s := range rep.Extensions.Stored {
		if !s.Linked {
			unlinked = append(unlinked, s.Path)
		}
	}
	if strings.Join(unlinked, " ") != "/opt/extensions/stray.raw" {
		t.Errorf("stored but not linked: %v", unlinked)
	}
	testutil.Run(t, "inspect", img).MustFail(t, 1, "WOULD NOT MERGE", "stored, not linked: /opt/extensions/stray.raw")
}

// No ROOT partition content to speak of: an empty ROOT has no extensions and no findings.
func TestInspectEmptyRoot(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4")
	rep := inspectImage(t, flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true}), 0)
	if rep.Extensions.Root != "ext4" || len(rep.Extensions.Links) != 0 {
		t.Fatalf("%+v", rep.Extensions)
	}
}

// Real Flatcar's USR-A is btrfs, possibly zstd-compressed: the os-release the kernel wrote
// there with compress-force=zstd is what "would merge" is judged against.
func TestInspectReadsZstdBtrfsUSR(t *testing.T) {
	testutil.RequireRoot(t, "mounting btrfs with compress-force=zstd to make a zstd USR-A")
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mount", "umount")
	dir := t.TempDir()
	usr := filepath.Join(dir, "usr.btrfs")
	testutil.KernelZstdBtrfs(t, usr, 120<<20, "USR-A", map[string][]byte{"lib/os-release": []byte("NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\nVERSION=4459.2.0\nVERSION_ID=4459.2.0\nSYSEXT_LEVEL=1.0\nPRETTY_NAME=\"Flatcar Container Linux by Kinvolk 4459.2.0 (Oklo)\"\nHOME_URL=\"https://flatcar.org/\"\n")})
	tree := t.TempDir()
	makeSysext(t, tree, "opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw", "kubernetes", sysext.Release{"ID": "flatcar", "VERSION_ID": "4459.2.0"})
	os.MkdirAll(filepath.Join(tree, "etc", "extensions"), 0o755)
	os.Symlink("/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw", filepath.Join(tree, "etc", "extensions", "kubernetes.raw"))
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, RootTree: tree, USRAImage: usr, USRASize: 128 << 20})
	rep := inspectImage(t, img, 0)
	x := rep.Extensions
	// VERSION_ID without SYSEXT_LEVEL merges only when the host's VERSION_ID is known and equal.
	if x.Host.Source != "/usr/lib/os-release on USR-A (btrfs)" || len(x.Links) != 1 || !x.Links[0].WouldMerge ||
		!strings.Contains(x.Links[0].Reason, "VERSION_ID=4459.2.0 match") {
		t.Fatalf("extensions: %+v", x)
	}
}
