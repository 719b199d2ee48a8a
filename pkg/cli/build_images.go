package cli

import (
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
)

// addImageFlags are build's container-image preload and containerd settings flags.
func addImageFlags(f *pflag.FlagSet, io *imagebuild.ImageOptions) {
	f.BoolVar(&io.NoPreload, "no-preload-images", false, "do not preload kubeadm's container images (containerd settings are still written)")
	f.StringArrayVar(&io.Refs, "image", nil, "preload this image too, e.g. a CNI's or the cloud-controller-manager's (repeatable)")
	f.StringVar(&io.File, "images-file", "", "preload the images listed in FILE (one ref per line, # comments)")
	f.StringVar(&io.Repository, "image-repository", "", "kubeadm's --image-repository: its images are listed and preloaded under this repository")
	f.StringArrayVar(&io.Mirrors, "registry-mirror", nil, "pull from, and point the node's containerd at, a mirror: REGISTRY=URL or *=URL; repeat it for several mirrors, tried in the order given;\n"+
		"REGISTRY is host[:port] or *; a path-prefixed mirror (Harbor proxy-cache project) is https://harbor.example/v2/PROJECT (containerd's override_path)")
	f.BoolVar(&io.MirrorOnly, "registry-mirror-only", false, "the node's containerd uses only the mirrors, never the registry itself as the last try (air-gapped)")
	f.BoolVar(&io.NodeAuth, "node-registry-auth", false, "give the node's containerd the docker config's login for each mirror (or registry): a secret in the image (root-only drop-in, image 0600); hosts.toml cannot hold one")
	f.StringVar(&io.CAFile, "registry-ca", "", "PEM CA that signed the registries' or mirrors' certificates (trusted here and on the node)")
	f.StringVar(&io.HTTPProxy, "http-proxy", "", "HTTP_PROXY for the node's containerd and kubelet (a password in it goes into the image: kept root-only there, the qcow2 written 0600)")
	f.StringVar(&io.HTTPSProxy, "https-proxy", "", "HTTPS_PROXY for the node's containerd and kubelet")
	f.StringVar(&io.NoProxy, "no-proxy", "", "NO_PROXY additions for the node's containerd and kubelet (localhost,127.0.0.1,169.254.169.254 are always in it); add the API server and its LB, service and pod CIDRs, .svc,.cluster.local")
}
