// Package nodeproof holds issue 26's proof and nothing else: real Kubernetes (built from the Go
// module proxy by scripts/install-kubernetes.sh) on an image `flatcar-capo build` made, booted
// offline with the bootstrap data the real CABPK writes for the cluster `flatcar-capo manifests`
// makes on a real management side; kubeadm init and join run by themselves. A package of its own so that `go test ./...` runs it beside the other packages
// (`make test`: the sysext method; `make node-proof`: both methods).
package nodeproof
