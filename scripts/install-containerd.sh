#!/usr/bin/env bash
# Builds a containerd (default 2.1.5, what Flatcar stable ships; `install-containerd.sh 2.3.7`
# for another: the containerd matrix of pkg/images) with ctr and the runc v2 shim, and crictl
# (cri-tools v1.34.0), from the Go module proxy, for the containerd proofs and the stand-in
# guest's image-preload proof; Debian has containerd 1.6 only and no cri-tools. Cached per
# version (a rerun only checks):
#   $CACHE/containerd/<version>/{containerd,ctr,containerd-shim-runc-v2,crictl}
# ($CACHE = ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo). The last stdout line is that directory.
# Usage: install-containerd.sh [VERSION] [--force]
# go.mod of containerd has exclude directives, so `go install pkg@v` is refused: a scratch
# module gets them, then one `go build` (no cgo; btrfs, devmapper and zfs snapshotters left out).
set -euo pipefail
CONTAINERD_VERSION=2.1.5
force=
for a in "$@"; do
  case $a in
  --force) force=1 ;;
  [0-9]*.[0-9]*.[0-9]*) CONTAINERD_VERSION=${a#v} ;;
  v[0-9]*) CONTAINERD_VERSION=${a#v} ;;
  *) echo "install-containerd: unknown argument $a (want a version such as 2.3.7, or --force)" >&2; exit 2 ;;
  esac
done
CRICTL_VERSION=1.34.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
dir=$cache/containerd/$CONTAINERD_VERSION
log() { echo "install-containerd: $*" >&2; }

ok() {
  [ -x "$dir/containerd" ] && [ -x "$dir/ctr" ] && [ -x "$dir/containerd-shim-runc-v2" ] && [ -x "$dir/crictl" ] &&
    "$dir/containerd" --version 2>/dev/null | grep -Eq " v?$CONTAINERD_VERSION[ +]"
}
if [ -z "$force" ] && ok; then echo "$dir"; exit 0; fi
# One build at a time, and a test that needs this version waits for the lock
# (registrytest.ContainerdDirOf) while install-deps.sh builds the matrix in the background.
mkdir -p "$cache/containerd"
exec 9>>"$cache/containerd/.build.lock"
flock 9
if [ -z "$force" ] && ok; then echo "$dir"; exit 0; fi
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir"
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0
go mod init scratch >/dev/null 2>&1
go get "github.com/containerd/containerd/v2/cmd/containerd@v$CONTAINERD_VERSION" \
  "github.com/containerd/containerd/v2/cmd/ctr@v$CONTAINERD_VERSION" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v$CONTAINERD_VERSION" >&2
go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "-X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION" -o "$work/out/" \
  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 >&2
# crictl does not depend on the containerd version: reuse one another version's build made.
have=$(for c in "$cache"/containerd/*/crictl; do [ -x "$c" ] && "$c" --version 2>/dev/null | grep -q "v$CRICTL_VERSION\$" && echo "$c" && break; done || true)
if [ -n "$have" ]; then
  cp "$have" "$work/out/crictl"
else
  mkdir crictl && cd crictl && go mod init scratch-crictl >/dev/null 2>&1
  go get "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION" >&2
  go build -trimpath -ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION" -o "$work/out/" sigs.k8s.io/cri-tools/cmd/crictl >&2
fi
for b in containerd ctr containerd-shim-runc-v2 crictl; do install -m 0755 "$work/out/$b" "$dir/$b.tmp" && mv "$dir/$b.tmp" "$dir/$b"; done
ok || { log "ERROR: the built containerd does not say v$CONTAINERD_VERSION"; exit 1; }
log "built containerd $CONTAINERD_VERSION + ctr + shim and crictl $CRICTL_VERSION in $(( $(date +%s) - start )) s: $dir"
echo "$dir"
