package capo

import (
	"bytes"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// withImageRepository sets kubeadm's clusterConfiguration.imageRepository in every
// KubeadmControlPlane of the manifest, so kubeadm asks for the names an image built with
// `build --image-repository` preloaded (and its pause, the node's sandbox image). Its errors
// wrap errs.ErrInvalid: the value, or the manifest it was asked to change, is the caller's.
func withImageRepository(manifest []byte, repo string) ([]byte, error) {
	if repo == "" || strings.ContainsAny(repo, " \t\n\"'#${}") || strings.Contains(repo, "://") || strings.HasSuffix(repo, "/") {
		return nil, errs.Invalidf("invalid --image-repository %q: want a registry/path such as registry.example:5000/k8s", repo)
	}
	lines := bytes.Split(manifest, []byte("\n"))
	var out [][]byte
	n := 0
	for _, l := range lines {
		out = append(out, l)
		t := bytes.TrimLeft(l, " ")
		if string(t) == "clusterConfiguration:" {
			indent := len(l) - len(t) + 2
			out = append(out, []byte(strings.Repeat(" ", indent)+"imageRepository: "+yamlString(repo)))
			n++
		}
	}
	if n == 0 {
		return nil, errs.Invalidf("--image-repository: the manifest has no kubeadm clusterConfiguration to set it in")
	}
	return bytes.Join(out, []byte("\n")), nil
}
