#!/usr/bin/env bash
# Builds a real Kubernetes node's binaries from the Go module proxy (no download sites here), for
# the node proof (`make node-proof`): kubeadm, kubelet, kubectl, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy (k8s.io/kubernetes), etcd, CoreDNS, a static
# pause, and the CNI plugins bridge/host-local/loopback/portmap. All static, CGO_ENABLED=0.
# Cached per component (a rerun only checks; --force rebuilds):
#   $CACHE/kubernetes/$K8S_VERSION/{kubeadm,...,etcd,coredns,pause,cni/bridge,...}
# ($CACHE = ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo, as install-containerd.sh). The last stdout
# line is that directory. One build at a time: it holds $CACHE/kubernetes/.build.lock while it runs
# (a second run waits, then finds everything cached; the tests that use these binaries wait on it
# too, since `scripts/install-deps.sh test` starts this in the background). Versions are
# kubeadm's own pins for this release (`kubeadm config images list`): etcd 3.6.5-0, coredns
# v1.12.1, pause 3.10.1.
# k8s.io/kubernetes replaces its 31 staging modules with ./staging/src/k8s.io/X, so it cannot be
# `go install`ed: a scratch module replaces each with its published v0.NN.P instead, and ONE
# `go build` builds all seven commands so shared packages compile once.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=3.6.5
COREDNS_VERSION=1.12.1
PAUSE_VERSION=3.10.1
CNI_VERSION=1.7.1
K8S_COMMANDS="kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy"
CNI_PLUGINS="main/bridge ipam/host-local main/loopback meta/portmap"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
dir=$cache/kubernetes/$K8S_VERSION
force=; [ "${1:-}" = --force ] && force=1
log() { echo "install-kubernetes: $(date -u +%H:%M:%S) $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$dir/cni"
exec 9>>"$cache/kubernetes/.build.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=$(date +%s)

# install SRC... into DIR atomically (a half-copied binary never looks cached)
put() { local to=$1; shift; for b in "$@"; do install -m 0755 "$b" "$to/$(basename "$b").tmp" && mv "$to/$(basename "$b").tmp" "$to/$(basename "$b")"; done; }
scratch() { rm -rf "$work/$1" && mkdir -p "$work/$1" && cd "$work/$1" && go mod init "scratch-$1" >/dev/null 2>&1; }

k8s_ok() {
  for c in $K8S_COMMANDS; do [ -x "$dir/$c" ] || return 1; done
  "$dir/kubeadm" version -o short 2>/dev/null | grep -qx "$K8S_VERSION" &&
    "$dir/kubelet" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"
}
if [ -n "$force" ] || ! k8s_ok; then
  start=$(date +%s)
  scratch k8s
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}; patch=${K8S_VERSION##*.}
  go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >"$work/k8s.json"
  gomod=$(sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p' "$work/k8s.json")
  # the staging modules, published as k8s.io/X v0.MINOR.PATCH
  for m in $(sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$gomod"); do
    go mod edit -replace "$m=$m@v0.$minor.$patch"
  done
  [ "$(grep -c '=> k8s.io/' go.mod)" -ge 31 ] || { log "ERROR: found fewer than 31 staging replaces in $gomod"; exit 1; }
  go mod edit -require "k8s.io/kubernetes@$K8S_VERSION"
  pkgs=; for c in $K8S_COMMANDS; do pkgs="$pkgs k8s.io/kubernetes/cmd/$c"; done
  printf 'package tools\nimport (\n' >tools.go
  for p in $pkgs; do printf '\t_ "%s"\n' "$p" >>tools.go; done
  printf ')\n' >>tools.go
  sed -i 's/^package tools/\/\/go:build tools\n\npackage tools/' tools.go
  go mod tidy >&2
  v=k8s.io/component-base/version
  # shellcheck disable=SC2086
  go build -trimpath -ldflags "-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor \
    -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z" -o "$work/out/" $pkgs >&2
  for c in $K8S_COMMANDS; do put "$dir" "$work/out/$c"; done
  k8s_ok || { log "ERROR: the built kubeadm/kubelet do not say $K8S_VERSION"; exit 1; }
  log "built $K8S_COMMANDS $K8S_VERSION in $(( $(date +%s) - start )) s"
fi

# The CNI plugins right after the node's own binaries: then what a node carries is ready, and
# kubetest.RealNodeDir waits for only that. A plugin run without CNI_COMMAND prints its version
# and exits 1.
cni_ok() {
  local p out
  for p in $CNI_PLUGINS; do
    out=$("$dir/cni/${p#*/}" </dev/null 2>&1 || true)
    [[ $out == *" v$CNI_VERSION"* ]] || return 1
  done
}
if [ -n "$force" ] || ! cni_ok; then
  start=$(date +%s)
  scratch cni
  pkgs=; for p in $CNI_PLUGINS; do pkgs="$pkgs github.com/containernetworking/plugins/plugins/$p"; done
  go get "github.com/containernetworking/plugins@v$CNI_VERSION" >&2
  # shellcheck disable=SC2086
  go build -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$CNI_VERSION" \
    -o "$work/out/cni/" $pkgs >&2
  put "$dir/cni" "$work"/out/cni/*
  cni_ok || { log "ERROR: the built CNI plugins do not say v$CNI_VERSION"; exit 1; }
  log "built CNI plugins $CNI_VERSION in $(( $(date +%s) - start )) s"
fi
if [ -n "$force" ] || ! "$dir/etcd" --version 2>/dev/null | grep -q "etcd Version: $ETCD_VERSION"; then
  start=$(date +%s)
  scratch etcd
  mkdir -p cmd/etcd
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >cmd/etcd/main.go
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" ./cmd/etcd >&2
  put "$dir" "$work/out/etcd"
  log "built etcd $ETCD_VERSION in $(( $(date +%s) - start )) s"
fi

if [ -n "$force" ] || ! "$dir/coredns" -version 2>/dev/null | grep -q "CoreDNS-$COREDNS_VERSION"; then
  start=$(date +%s)
  scratch coredns
  # Only the plugins kubeadm's Corefile uses (upstream's main links all ~60, cloud SDKs
  # included, and takes several times as long to build): the same coremain, same version.
  printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n' >main.go
  for p in errors health ready kubernetes metrics forward cache loop reload loadbalance log; do
    printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p" >>main.go
  done
  printf ')\n\nfunc main() { coremain.Run() }\n' >>main.go
  go get "github.com/coredns/coredns@v$COREDNS_VERSION" >&2
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$work/out/coredns" . >&2
  put "$dir" "$work/out/coredns"
  log "built coredns $COREDNS_VERSION in $(( $(date +%s) - start )) s"
fi

# upstream's pause is a small C program; this is the same contract in Go: sleep until
# SIGINT/SIGTERM, reap orphaned children (it is PID 1 of the pod sandbox), -v prints the version.
if [ -n "$force" ] || ! "$dir/pause" -v 2>/dev/null | grep -qx "pause.go v$PAUSE_VERSION"; then
  scratch pause
  cat >main.go <<EOF
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause.go v$PAUSE_VERSION")
		return
	}
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
EOF
  go build -trimpath -ldflags "-s -w" -o "$work/out/pause" . >&2
  put "$dir" "$work/out/pause"
fi

log "ready in $(( $(date +%s) - total )) s: $dir"
echo "$dir"
