package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// KubeadmList runs the verified kubeadm binary's own `config images list` for version (and
// repo, kubeadm's --image-repository), so the list is never a hand-kept table. kubeadm's list
// does not depend on its arch, but the binary must run here: an arm64 kubeadm on an amd64
// host cannot, and the error says what to do.
func KubeadmList(ctx context.Context, kubeadm, version, repo string) ([]string, error) {
	if err := os.Chmod(kubeadm, 0o755); err != nil && !errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("kubeadm %s: %w", kubeadm, err)
	}
	args := []string{"config", "images", "list", "--kubernetes-version", version}
	if repo != "" {
		args = append(args, "--image-repository", repo)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubeadm, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "KUBECONFIG=/dev/null"} // offline: kubeadm must not look up versions
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) || strings.Contains(err.Error(), "exec format error") {
			return nil, fmt.Errorf("kubeadm %s is for another architecture and cannot run on this host to list its images; build on a host of the image's arch, or leave preloading out with --no-preload-images", kubeadm)
		}
		return nil, fmt.Errorf("kubeadm config images list --kubernetes-version %s: %v: %s", version, err, strings.TrimSpace(stderr.String()))
	}
	var refs []string
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "W") && strings.Contains(l, "]") { // klog warnings
			continue
		}
		if _, err := ParseRef(l); err != nil {
			return nil, fmt.Errorf("kubeadm config images list printed %q: %v", l, err)
		}
		refs = append(refs, l)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("kubeadm config images list --kubernetes-version %s printed no images", version)
	}
	return refs, nil
}

// Pause is kubeadm's pause image in refs (the node's sandbox image), "" when none.
func Pause(refs []Ref) string {
	for _, r := range refs {
		if p := r.Repo.RepositoryStr(); p == "pause" || strings.HasSuffix(p, "/pause") {
			return r.Name
		}
	}
	return ""
}
