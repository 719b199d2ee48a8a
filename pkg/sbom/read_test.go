package sbom

import (
	"reflect"
	"testing"
)

// Read gives back the files, sysexts and images Encode wrote, so verify can compare them.
func TestReadIsEncodesInverse(t *testing.T) {
	in := Inventory{
		Files:   []File{{Name: "kubeadm", Version: "v1.31.0", SHA256: "ab12", URL: "https://dl.k8s.io/v1.31.0/bin/linux/amd64/kubeadm"}, {Name: "bridge", SHA256: "cd34", Path: "/opt/cni/bin/bridge"}},
		Sysexts: []Sysext{{File: "kubernetes-v1.31.0-x86-64.raw", Version: "v1.31.0", SHA512: "ef56", Path: "/opt/extensions/kubernetes/kubernetes-v1.31.0-x86-64.raw"}},
		Images:  []Image{{Ref: "registry.k8s.io/pause:3.10", Digest: "sha256:0123", Platform: "linux/amd64"}},
	}
	b, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Files, in.Files) || !reflect.DeepEqual(out.Sysexts, in.Sysexts) || !reflect.DeepEqual(out.Images, in.Images) {
		t.Fatalf("Read(Encode(x)) = %+v, want %+v", out, in)
	}
	if _, err := Read([]byte("{")); err == nil {
		t.Fatal("Read accepted a broken SBOM")
	}
}
