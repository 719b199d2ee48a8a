// Command image writes flatcar-capo's container image as an OCI image index (amd64 and arm64),
// built in Go with go-containerregistry: no Docker daemon, no base image. Each image is one
// layer: the static binary, CA certificates, a non-root user (65532) and a /work directory for the
// emptyDir a pod mounts there; the sysext method needs nothing else. The same inputs give the same
// digest: every timestamp is SOURCE_DATE_EPOCH (default 0), owners and modes are fixed, entries sorted.
// Each config carries the org.opencontainers.image.{source,version,revision} labels.
//
// With --shell ARCH=BUSYBOX the same layout holds a second index, -shell-ref (flatcar-capo:shell):
// the same image plus a static busybox as /bin/sh and its common applets, with no entrypoint, for CI
// runners that pipe a job's script into `sh` in the job image (GitLab Runner).
//
//	go run ./scripts/image -o bin/image --binary amd64=bin/linux-amd64/flatcar-capo --binary arm64=... \
//	  --shell amd64=/bin/busybox --version v1.2.3 --revision $(git rev-parse HEAD)
//
// writes bin/image (an OCI layout naming both), bin/image.tar and bin/image-shell.tar (an
// oci-archive of each: `podman load -i`, or `skopeo copy --all oci-archive:bin/image-shell.tar
// docker://...`) and prints each ref with its index digest and archive.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Source is the org.opencontainers.image.source label's default: the project's repository.
const Source = "https://github.com/flatcar-capo/flatcar-capo"

// shellApplets are the busybox applets the shell image links into /bin: what CI job scripts and
// GitLab Runner's own script use. A fixed list, so the layer does not depend on running busybox
// (an arm64 busybox cannot run on an amd64 build host).
var shellApplets = []string{"[", "awk", "basename", "cat", "chmod", "cp", "cut", "date", "dirname", "echo", "env",
	"expr", "false", "find", "grep", "gunzip", "gzip", "head", "id", "ln", "ls", "mkdir", "mktemp", "mv", "printf",
	"pwd", "readlink", "realpath", "rm", "sed", "sh", "sha256sum", "sha512sum", "sleep", "sort", "stat", "tail",
	"tar", "tee", "test", "touch", "tr", "true", "uname", "uniq", "wc", "which", "xargs"}

// User is the image's non-root user and group.
const User = 65532

type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaries) Set(v string) error {
	arch, path, ok := strings.Cut(v, "=")
	if !ok || (arch != "amd64" && arch != "arm64") {
		return fmt.Errorf("want amd64=PATH or arm64=PATH, not %q", v)
	}
	b[arch] = path
	return nil
}

func main() {
	out := flag.String("o", "bin/image", "output OCI layout directory (OUT.tar and, with --shell, OUT-shell.tar are the oci-archives)")
	certs := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle for the image")
	extra := flag.String("extra", "", "directory whose tree is added to the image (make image-packer: packer, its plugin, qemu)")
	ref := flag.String("ref", "flatcar-capo:latest", "name of the image in index.json (what podman load calls it)")
	shellRef := flag.String("shell-ref", "flatcar-capo:shell", "name of the image with a shell (--shell) in index.json")
	version := flag.String("version", "dev", "org.opencontainers.image.version label")
	revision := flag.String("revision", "", "org.opencontainers.image.revision label (the commit)")
	source := flag.String("source", Source, "org.opencontainers.image.source label")
	var env envList
	flag.Var(&env, "env", "KEY=VALUE added to the image's environment (repeatable)")
	bins, shells := binaries{}, binaries{}
	flag.Var(bins, "binary", "ARCH=PATH of the static flatcar-capo binary (repeatable)")
	flag.Var(shells, "shell", "ARCH=PATH of a static busybox: also write the shell image for ARCH (repeatable)")
	flag.Parse()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "image: give at least one --binary ARCH=PATH")
		os.Exit(2)
	}
	epoch := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "image: SOURCE_DATE_EPOCH=%q is not a number\n", s)
			os.Exit(2)
		}
		epoch = time.Unix(n, 0).UTC()
	}
	for _, k := range []string{*ref, *shellRef} {
		if !validRef(k) {
			fmt.Fprintf(os.Stderr, "image: %q is not a NAME:TAG reference\n", k)
			os.Exit(2)
		}
	}
	refs, err := Write(*out, Spec{Binaries: bins, Shells: shells, Certs: *certs, Extra: *extra, Epoch: epoch, Env: env,
		Ref: *ref, ShellRef: *shellRef, Labels: Labels(*source, *version, *revision)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	for _, r := range refs {
		fmt.Println(r.Name, r.Digest, r.Archive)
	}
}

// Spec is what Write builds.
type Spec struct {
	Binaries     binaries // ARCH -> static flatcar-capo
	Shells       binaries // ARCH -> static busybox: the archs of the ShellRef index (none: no shell image)
	Certs, Extra string   // CA bundle; a tree added to every image (make image-packer)
	Epoch        time.Time
	Env          []string          // added to the images' environment
	Labels       map[string]string // every image config's labels (besides title and description)
	Ref          string            // index.json's name of the image
	ShellRef     string            // and of the image with a shell
}

// Ref is one named index of the layout, and its own oci-archive.
type Ref struct{ Name, Digest, Archive string }

// Labels are the OCI annotation keys that say where an image comes from.
func Labels(source, version, revision string) map[string]string {
	l := map[string]string{"org.opencontainers.image.source": source, "org.opencontainers.image.version": version}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	return l
}

// validRef: a NAME:TAG that podman and skopeo accept in index.json (no registry port confusion).
func validRef(r string) bool {
	name, tag, ok := strings.Cut(r, ":")
	return ok && name != "" && tag != "" && !strings.ContainsAny(r, " \t\n@") && !strings.Contains(tag, ":")
}

// Write builds the indexes and writes them to out (one OCI layout naming both) and to one
// oci-archive each, out.tar and out-shell.tar (podman load takes an archive of one image only); it
// returns each ref with its index digest and archive, the plain image first.
func Write(out string, s Spec) ([]Ref, error) {
	ca, err := os.ReadFile(s.Certs)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	for arch := range s.Shells {
		if s.Binaries[arch] == "" {
			return nil, fmt.Errorf("--shell %s=... without --binary %s=...", arch, arch)
		}
	}
	plain, err := index(s, ca, nil)
	if err != nil {
		return nil, err
	}
	indexes := []v1.ImageIndex{plain}
	refs := []Ref{{Name: s.Ref, Archive: out + ".tar"}}
	if len(s.Shells) > 0 {
		shell, err := index(s, ca, s.Shells)
		if err != nil {
			return nil, err
		}
		indexes, refs = append(indexes, shell), append(refs, Ref{Name: s.ShellRef, Archive: out + "-shell.tar"})
	}
	for i, idx := range indexes {
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		refs[i].Digest = d.String()
		if err := writeArchive(refs[i].Archive, indexes[i:i+1], refs[i:i+1], s.Epoch); err != nil {
			return nil, err
		}
	}
	tmp := out + ".tmp"
	if err := writeLayout(tmp, indexes, refs); err != nil {
		return nil, err
	}
	os.RemoveAll(out)
	return refs, os.Rename(tmp, out)
}

// writeLayout writes an OCI layout whose index.json names each multi-arch index
// (flatcar-capo:latest, flatcar-capo:shell): podman load picks the machine's platform from it,
// skopeo copies one as oci-archive:FILE:NAME (--all: every platform).
func writeLayout(dir string, indexes []v1.ImageIndex, refs []Ref) error {
	os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for i, idx := range indexes {
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refs[i].Name})); err != nil {
			return err
		}
	}
	return nil
}

// writeArchive writes the layout of indexes as an oci-archive at path, renamed into place when complete.
func writeArchive(path string, indexes []v1.ImageIndex, refs []Ref, epoch time.Time) error {
	tmp := path + ".layout.tmp"
	defer os.RemoveAll(tmp)
	if err := writeLayout(tmp, indexes, refs); err != nil {
		return err
	}
	if err := tarDir(tmp, path+".tmp", epoch); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// index is the multi-arch index of the plain image (shells nil) or of the shell image (the
// archs shells names).
func index(s Spec, ca []byte, shells binaries) (v1.ImageIndex, error) {
	archs := s.Binaries
	if shells != nil {
		archs = shells
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range slices.Sorted(maps.Keys(archs)) {
		bin, err := os.ReadFile(s.Binaries[arch])
		if err != nil {
			return nil, err
		}
		var sh []byte
		if shells != nil {
			if sh, err = os.ReadFile(shells[arch]); err != nil {
				return nil, err
			}
		}
		img, err := image(arch, bin, ca, sh, s)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, nil
}

func image(arch string, bin, ca, shell []byte, s Spec) (v1.Image, error) {
	epoch := s.Epoch
	layer, err := rootLayer(bin, ca, s.Extra, epoch)
	if err != nil {
		return nil, err
	}
	layers := []v1.Layer{layer}
	if shell != nil {
		// A layer of its own: the shell image shares the plain one's layer (stored and pushed once).
		if layer, err = shellLayer(shell, epoch); err != nil {
			return nil, err
		}
		layers = append(layers, layer)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: epoch}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", User, User),
		Entrypoint: []string{"/usr/local/bin/flatcar-capo"},
		WorkingDir: "/work",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			"HOME=/work", "XDG_CACHE_HOME=/work/cache", "TMPDIR=/work"},
		Labels: map[string]string{"org.opencontainers.image.title": "flatcar-capo",
			"org.opencontainers.image.description": "Flatcar Container Linux images for Cluster API Provider OpenStack",
			"org.opencontainers.image.created":     epoch.UTC().Format(time.RFC3339)},
	}
	if shell != nil {
		// GitLab Runner runs the job image's entrypoint with `sh -c <find a shell>` as its command
		// and pipes the job script in: an entrypoint that is not a shell swallows that command.
		cfg.Config.Entrypoint, cfg.Config.Cmd = nil, []string{"/bin/sh"}
	}
	maps.Copy(cfg.Config.Labels, s.Labels)
	cfg.Config.Env = append(cfg.Config.Env, s.Env...)
	cfg.History = nil
	return mutate.ConfigFile(img, cfg)
}

type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }
func (e *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=VALUE, not %q", v)
	}
	*e = append(*e, v)
	return nil
}

type entry struct {
	name     string
	mode     int64
	uid      int
	data     []byte
	dir      bool
	linkname string
}

// rootLayer is the image's first layer as a deterministic tar.
func rootLayer(bin, ca []byte, extra string, epoch time.Time) (v1.Layer, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nflatcar-capo:x:%d:%d:flatcar-capo:/work:/sbin/nologin\n", User, User))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nflatcar-capo:x:%d:\n", User))},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/flatcar-capo", mode: 0o755, data: bin},
		{name: "work/", mode: 0o755, dir: true, uid: User},
	}
	if extra != "" {
		more, err := treeEntries(extra)
		if err != nil {
			return nil, err
		}
		entries = append(entries, more...)
	}
	return layerOf(entries, epoch)
}

// shellLayer is the shell image's second layer: /bin with busybox and its applets.
func shellLayer(busybox []byte, epoch time.Time) (v1.Layer, error) {
	entries := []entry{{name: "bin/", mode: 0o755, dir: true}, {name: "bin/busybox", mode: 0o755, data: busybox}}
	for _, a := range shellApplets {
		entries = append(entries, entry{name: "bin/" + a, mode: 0o777, linkname: "busybox"})
	}
	return layerOf(entries, epoch)
}

// layerOf writes entries as a deterministic tar layer.
func layerOf(entries []entry, epoch time.Time) (v1.Layer, error) {
	// The extra tree repeats directories the base has (usr/, usr/local/bin/): one entry each, the
	// base's (podman refuses a layer with duplicate paths).
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range entries {
		if i > 0 && entries[i-1].name == e.name {
			if !e.dir {
				return nil, fmt.Errorf("%s is in the image twice", e.name)
			}
			continue
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX, Size: int64(len(e.data))}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.linkname != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.linkname, 0
		default:
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// treeEntries reads a directory tree as layer entries (root-owned, modes kept).
func treeEntries(root string) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{name: filepath.ToSlash(rel), mode: int64(fi.Mode().Perm())}
		switch {
		case fi.IsDir():
			e.name, e.dir = e.name+"/", true
		case fi.Mode()&fs.ModeSymlink != 0:
			if e.linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: only files, directories and symlinks go into the image", p)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// tarDir writes dir as a deterministic tar (the oci-archive podman and skopeo load).
func tarDir(dir, out string, epoch time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
