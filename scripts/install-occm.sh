#!/usr/bin/env bash
# Builds the OpenStack cloud controller manager (k8s.io/cloud-provider-openstack's
# cmd/openstack-cloud-controller-manager) from the Go module proxy for `make capo-proof`: the
# workload cluster's kubelets run with cloud-provider: external, so a node keeps the
# node.cloudprovider.kubernetes.io/uninitialized taint until this manager initialises it. The
# proof packs the binary into an OCI image (internal/testing/occmtest) and preloads it with
# `flatcar-capo build --image`. Beside the binary, the module's manifests/controller-manager/ as
# shipped (RBAC, the DaemonSet, the example cloud-config), which is what a user applies. Cached:
#   $CACHE/occm/$OCCM_VERSION/openstack-cloud-controller-manager
#   $CACHE/occm/$OCCM_VERSION/manifests/controller-manager/...
# ($CACHE = ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo, as install-capi.sh; a rerun only checks,
# --force rebuilds). One build at a time ($CACHE/occm/.build.lock). Built in its own scratch module
# (minimal version selection beside another module would lift its pins), static, trimmed,
# stripped, with the version stamped as upstream's Makefile does (-X), so --version names it.
# Runs at the lowest CPU and I/O priority: make capo-proof's cloud runs TCG guests meanwhile.
set -euo pipefail
OCCM_VERSION=${OCCM_VERSION:-v1.34.1}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
force=; [ "${1:-}" = --force ] && force=1
log() { echo "install-occm: $(date -u +%H:%M:%S) $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0
mod=k8s.io/cloud-provider-openstack
d=$cache/occm/$OCCM_VERSION
mkdir -p "$d"
exec 9>>"$cache/occm/.build.lock"
flock 9
bin=$d/openstack-cloud-controller-manager
if [ -z "$force" ] && [ -x "$bin" ] && [ -e "$d/.manifests" ]; then echo "$d"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
src=$(go mod download -json "$mod@$OCCM_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')

if [ -n "$force" ] || [ ! -x "$bin" ]; then
  (cd "$work" && go mod init scratch >/dev/null 2>&1 && nice -n 19 ionice -c3 go get "$mod@$OCCM_VERSION" >&2)
  ld="-s -w -X 'k8s.io/component-base/version.gitVersion=$OCCM_VERSION' -X '$mod/pkg/version.Version=$OCCM_VERSION'"
  (cd "$work" && nice -n 19 ionice -c3 go build -trimpath -ldflags "$ld" -o "$bin.tmp" "$mod/cmd/openstack-cloud-controller-manager" >&2)
  mv "$bin.tmp" "$bin"
  log "built openstack-cloud-controller-manager ($mod $OCCM_VERSION) in $(( $(date +%s) - start )) s"
fi

# The manifests exactly as the module ships them, complete or not at all.
rm -rf "$d/.manifests.tmp" && mkdir -p "$d/.manifests.tmp/manifests"
cp -r "$src/manifests/controller-manager" "$d/.manifests.tmp/manifests/"
chmod -R u+w "$d/.manifests.tmp"
rm -rf "$d/manifests" && mv "$d/.manifests.tmp/manifests" "$d/" && rmdir "$d/.manifests.tmp" && touch "$d/.manifests"
echo "$d"
