package imagebuild

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// imagesPlan is what stepImages pulled and what the node gets.
type imagesPlan struct {
	Pulled  *images.Result
	Archive *images.Archive // nil without images
	Node    images.Node
}

// stepImages lists kubeadm's images with the verified kubeadm binary itself (plus --image and
// --images-file), pulls them for the image's platform into the cache (digests verified) and
// plans the node's files: the archive, the import unit, the containerd settings.
type stepImages struct{ noCleanup }

func (*stepImages) Name() string { return "images" }

func (*stepImages) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	io := &o.Images
	plan := &imagesPlan{Node: images.Node{Mirrors: io.mirrors, MirrorOnly: io.MirrorOnly, CAFile: io.CAFile, HTTPProxy: io.HTTPProxy, HTTPSProxy: io.HTTPSProxy, NoProxy: io.NoProxy}}
	keyImages.put(state, plan)
	if io.NodeAuth && len(io.mirrors) > 0 { // the mirrors' logins; without mirrors, the registries' below
		var err error
		if plan.Node.Auth, err = images.NodeAuth(images.NodeAuthHosts(io.mirrors, nil)); err != nil {
			return halt(state, err)
		}
	}
	if io.NoPreload {
		note(state, "preloading off (--no-preload-images): containerd settings only")
		return multistep.ActionContinue
	}
	kubeadm, err := kubeadmBinary(state, o)
	if err != nil {
		return halt(state, err)
	}
	list, err := images.KubeadmList(ctx, kubeadm, o.Kubernetes.Kubernetes, io.Repository)
	if err != nil {
		return halt(state, err)
	}
	refs, err := images.ParseRefs(append(list, io.extra...))
	if err != nil {
		return halt(state, err)
	}
	cache := cmp.Or(o.CacheDir, filepath.Join(keyWorkDir.get(state), "cache"))
	res, err := images.Pull(ctx, refs, images.Options{Arch: o.Release.Arch, CacheDir: cache, Mirrors: io.mirrors, CAFile: io.CAFile,
		Transport: func(cfg *tls.Config) http.RoundTripper { return httpx.NewTransportTLS(o.client().Options(), cfg) }, Log: indented{o.Log, "  "}})
	if err != nil {
		return halt(state, err)
	}
	plan.Pulled = res
	if plan.Archive, err = images.NewArchive(cache, res.Images); err != nil {
		return halt(state, err)
	}
	plan.Node.Images, plan.Node.Sandbox, plan.Node.Registries = res.Images, images.Pause(refs), images.Registries(refs)
	if io.NodeAuth && plan.Node.Auth == nil {
		if plan.Node.Auth, err = images.NodeAuth(images.NodeAuthHosts(io.mirrors, plan.Node.Registries)); err != nil {
			return halt(state, err)
		}
	}
	plan.Node.Kubernetes = o.Kubernetes.Kubernetes
	for _, r := range refs[:len(list)] {
		plan.Node.Kubeadm = append(plan.Node.Kubeadm, r.Name)
	}
	rec.Images = rec.Images[:0]
	for _, im := range res.Images {
		rec.Images = append(rec.Images, images.ListEntry{Name: im.Name, Digest: im.Digest, Platform: im.Platform, Size: im.Size})
	}
	note(state, "%d images for linux/%s (%d from kubeadm %s), %.1f MiB; %d blobs fetched (%.1f MiB), %d from the cache",
		len(res.Images), o.Release.Arch, len(list), o.Kubernetes.Kubernetes, float64(plan.Archive.Size)/(1<<20),
		res.Fetched, float64(res.Transferred)/(1<<20), res.Cached)
	return multistep.ActionContinue
}

// kubeadmBinary is the verified kubeadm: the download, or the one in the --sysext Kubernetes
// sysext (copied out into the build directory).
func kubeadmBinary(state multistep.StateBag, o *Options) (string, error) {
	if set := keyK8s.get(state); set != nil {
		if f, ok := set.ByName("bin/kubeadm"); ok {
			return f.Path, nil
		}
	}
	for _, x := range keySysexts.get(state) {
		if x.Name != sysext.KubernetesName {
			continue
		}
		data, err := sysext.ReadFile(x.Path, "usr/bin/kubeadm", 1<<30)
		if err != nil {
			return "", fmt.Errorf("listing kubeadm's images: %w (pass --no-preload-images to build without preloaded images)", err)
		}
		p := filepath.Join(keyWorkDir.get(state), "kubeadm")
		if err := os.WriteFile(p, data, 0o700); err != nil {
			return "", err
		}
		return p, nil
	}
	return "", fmt.Errorf("no verified kubeadm to list its images with")
}

// writeImagesPayload lays the node's image files out for the guest as the tree they take in
// ROOT (payload/images/root/...), the archive included; install-images.sh copies the tree into
// place and imports the images into the build VM's containerd when it runs one.
func writeImagesPayload(ctx context.Context, state multistep.StateBag, payload string) error {
	entries, err := imageEntries(ctx, state)
	if err != nil || len(entries) == 0 {
		return err
	}
	tree := filepath.Join(payload, "images", "root")
	// Symlinks go in a list, not the tree: Packer's file provisioner would follow them on the host.
	var links []string
	for _, e := range entries {
		p := filepath.Join(tree, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch {
		case e.IsSymlink():
			links = append(links, e.Target+" /"+e.Path)
		case e.IsRegular():
			if err := writeEntry(e, p); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(payload, "images", "links"), []byte(strings.Join(links, "\n")+"\n"), 0o644)
}

func writeEntry(e rootfs.Entry, p string) error {
	r, err := e.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.Mode.Perm()|0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != e.Size {
		err = fmt.Errorf("%s: wrote %d bytes, want %d", p, n, e.Size)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return os.Chmod(p, e.Mode.Perm())
}
