package sysext

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// kubernetesInputFromDir finds the Kubernetes files in dir, for users who downloaded them
// themselves (air-gapped hosts): kubelet, kubeadm and kubectl in dir or dir/bin, and optionally
// the CNI plugins (cni-plugins*.tgz, or a cni/ directory) and crictl (crictl*.tar.gz or a
// crictl binary). That is also the payload layout `build` writes.
func kubernetesInputFromDir(dir, version, arch string) (KubernetesInput, error) {
	in := KubernetesInput{Version: version, Arch: arch}
	find := func(patterns ...string) string {
		for _, p := range patterns {
			m, _ := filepath.Glob(filepath.Join(dir, p))
			sort.Strings(m)
			for _, f := range m {
				if fi, err := os.Stat(f); err == nil && (fi.Mode().IsRegular() || (fi.IsDir() && filepath.Base(f) == "cni")) {
					return f
				}
			}
		}
		return ""
	}
	in.Kubelet = find("kubelet", "bin/kubelet")
	in.Kubeadm = find("kubeadm", "bin/kubeadm")
	in.Kubectl = find("kubectl", "bin/kubectl")
	for name, p := range map[string]string{"kubelet": in.Kubelet, "kubeadm": in.Kubeadm, "kubectl": in.Kubectl} {
		if p == "" {
			goArch := arch
			if a, err := Arch(arch); err == nil {
				goArch = strings.Replace(a, "x86-64", "amd64", 1) // Kubernetes' name for it
			}
			return in, fmt.Errorf("%s has no %s (looked for %s/%s and %s/bin/%s; get it from https://dl.k8s.io/release/%s/bin/linux/%s/%s)",
				dir, name, dir, name, dir, name, version, goArch, name)
		}
	}
	in.CNIPlugins = find("cni-plugins*.tgz", "cni")
	in.Crictl = find("crictl*.tar.gz", "crictl", "bin/crictl")
	return in, nil
}
