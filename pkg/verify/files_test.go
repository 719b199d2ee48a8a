package verify

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// The packer method's binaries: a download that is the binary itself (kubeadm) is compared with
// /opt/bin's file; crictl's and the CNI plugins' archives are not (they unpack to other files);
// a file listed by its path (an inspect SBOM) must be there.
func TestVerifyComparesOptBinFiles(t *testing.T) {
	claimed := sbom.Inventory{Files: []sbom.File{
		{Name: "kubeadm", SHA256: "aaaa", URL: "https://dl.k8s.io/release/v1.33.4/bin/linux/amd64/kubeadm"},
		{Name: "kubelet", SHA256: "bbbb", URL: "https://dl.k8s.io/release/v1.33.4/bin/linux/amd64/kubelet"},
		{Name: "crictl", SHA256: "cccc", URL: "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.33.0/crictl-v1.33.0-linux-amd64.tar.gz"},
		{Name: "bridge", SHA256: "dddd", Path: "/opt/cni/bin/bridge"},
	}}
	found := sbom.Inventory{Files: []sbom.File{
		{Name: "kubeadm", SHA256: "aaaa", Path: "/opt/bin/kubeadm"},
		{Name: "kubelet", SHA256: "ffff", Path: "/opt/bin/kubelet"},
		{Name: "crictl", SHA256: "9999", Path: "/opt/bin/crictl"},
	}}
	v := &Result{OK: true}
	v.compare(claimed, found)
	got := v.Problems()
	if v.OK || v.ContentsChecked != 3 || len(v.Mismatches) != 2 ||
		!strings.Contains(got, "file /opt/bin/kubelet: the SBOM says sha256 bbbb, the image holds sha256 ffff") ||
		!strings.Contains(got, "file /opt/cni/bin/bridge: the SBOM says sha256 dddd, the image holds none") || strings.Contains(got, "crictl") {
		t.Fatalf("checked %d, problems: %s", v.ContentsChecked, got)
	}
}
