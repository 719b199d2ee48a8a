#!/usr/bin/env bash
# Builds the Cluster API management side from the Go module proxy, for the tests that run it on
# 127.0.0.1 (internal/testing/capitest): for each CAPI version the core, CABPK and KCP managers
# (sigs.k8s.io/cluster-api: the module root, bootstrap/kubeadm, controlplane/kubeadm), the CAPO
# manager (sigs.k8s.io/cluster-api-provider-openstack), and beside the binaries each module's CRDs
# (config/crd/bases) and admission webhooks (config/webhook/manifests.yaml), copied from the
# module tree with the same relative paths; ORC's CRDs the same way, and with ORC_MANAGER=1 (make
# capo-proof) ORC's manager (CAPO's docs require ORC beside CAPO v0.12+; it resolves the ORC
# Images of --image-ref orc; make test needs only its CRDs, so a fresh machine skips the build). Cached:
#   $CACHE/capi/$V/{capi,cabpk,kcp}-manager, config/... (core/config/... since v1.14), bootstrap/kubeadm/config/...,
#   controlplane/kubeadm/config/...
#   $CACHE/capo/$CAPO_VERSION/capo-manager, config/...
#   $CACHE/orc/$ORC_VERSION/orc-manager, config/crd/bases
# ($CACHE = ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo, as install-kubernetes.sh; a rerun only checks,
# --force rebuilds). One build at a time: it holds $CACHE/capi/.build.lock while it runs (a second
# run waits, then finds everything cached; the tests wait on it too, since
# `scripts/install-deps.sh test` starts this in the background). Each module builds in its own
# scratch module: beside a newer CAPI, minimal version selection would lift CAPO's pinned one.
# Static, trimmed, stripped (~62-67 MB each); a binary or tree appears only when complete, by rename.
# The first pairing (CAPO's tested one, CAPI v1.12.10 + CAPO v0.14.7) is built first.
set -euo pipefail
CAPI_VERSIONS=${CAPI_VERSIONS:-v1.12.10 v1.14.2}
CAPO_VERSION=${CAPO_VERSION:-v0.14.7}
ORC_VERSION=${ORC_VERSION:-v2.4.0}
ORC_MANAGER=${ORC_MANAGER:-0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
force=; [ "${1:-}" = --force ] && force=1
log() { echo "install-capi: $(date -u +%H:%M:%S) $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$cache/capi"
exec 9>>"$cache/capi/.build.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=$(date +%s)

# src MODULE@VERSION: the module's directory in the module cache
src() { go mod download -json "$1" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'; }

# manifests SRC DIR SUBDIR...: each SUBDIR's config/crd/bases and config/webhook/manifests.yaml
# (when there is one) from SRC into DIR, same relative paths, complete or not at all
manifests() {
  local from=$1 to=$2 s; shift 2
  [ -z "$force" ] && [ -e "$to/.manifests" ] && return 0
  rm -rf "$to/.manifests.tmp" && mkdir -p "$to/.manifests.tmp"
  for s in "$@"; do
    mkdir -p "$to/.manifests.tmp/$s/config/crd" && cp -r "$from/$s/config/crd/bases" "$to/.manifests.tmp/$s/config/crd/"
    if [ -f "$from/$s/config/webhook/manifests.yaml" ]; then
      mkdir -p "$to/.manifests.tmp/$s/config/webhook" && cp "$from/$s/config/webhook/manifests.yaml" "$to/.manifests.tmp/$s/config/webhook/"
    fi
  done
  chmod -R u+w "$to/.manifests.tmp"
  rm -rf "$to/config" "$to/core" "$to/bootstrap" "$to/controlplane"
  mv "$to/.manifests.tmp"/* "$to/" && rmdir "$to/.manifests.tmp" && touch "$to/.manifests"
}

# managers DIR MODULE@VERSION NAME=PACKAGE...: one `go build -o` per NAME (two CAPI packages are
# named kubeadm) in one scratch module, so what they share compiles once
managers() {
  local to=$1 mv=$2 p need=; shift 2
  for p in "$@"; do [ -n "$force" ] || [ ! -x "$to/${p%%=*}" ] && need=1; done
  [ -z "$need" ] && return 0
  local s=$work/${mv//[\/@]/_}
  mkdir -p "$s" && (cd "$s" && go mod init scratch >/dev/null 2>&1)
  # CAPI v1.14 moved its API types to the module sigs.k8s.io/cluster-api/api, which its go.mod
  # requires at v0.0.0 and replaces with ./api: a scratch module pins the published one instead.
  if grep -q '^replace sigs.k8s.io/cluster-api/api => ./api' "$(src "$mv")/go.mod"; then
    (cd "$s" && go mod edit -replace "sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@${mv#*@}")
  fi
  (cd "$s" && go get "$mv" >&2)
  for p in "$@"; do
    [ -z "$force" ] && [ -x "$to/${p%%=*}" ] && continue
    local start; start=$(date +%s)
    (cd "$s" && go build -trimpath -ldflags '-s -w' -o "$to/${p%%=*}.tmp" "${p#*=}" >&2)
    mv "$to/${p%%=*}.tmp" "$to/${p%%=*}"
    log "built ${p%%=*} (${p#*=} ${mv#*@}) in $(( $(date +%s) - start )) s"
  done
}

first=${CAPI_VERSIONS%% *}
for v in $first "$CAPO_VERSION" ${CAPI_VERSIONS#"$first"}; do
  if [ "$v" = "$CAPO_VERSION" ]; then
    d=$cache/capo/$v; mkdir -p "$d"
    managers "$d" "sigs.k8s.io/cluster-api-provider-openstack@$v" capo-manager=sigs.k8s.io/cluster-api-provider-openstack
    manifests "$(src "sigs.k8s.io/cluster-api-provider-openstack@$v")" "$d" .
    o=$cache/orc/$ORC_VERSION; mkdir -p "$o"
    [ "$ORC_MANAGER" != 1 ] || managers "$o" "github.com/k-orc/openstack-resource-controller/v2@$ORC_VERSION" orc-manager=github.com/k-orc/openstack-resource-controller/v2/cmd/manager
    manifests "$(src "github.com/k-orc/openstack-resource-controller/v2@$ORC_VERSION")" "$o" .
    continue
  fi
  d=$cache/capi/$v; mkdir -p "$d"
  s=$(src "sigs.k8s.io/cluster-api@$v")
  # The core manager and its config are the module root's up to v1.13, core/ since v1.14.
  core=.; pkg=sigs.k8s.io/cluster-api
  [ -f "$s/core/main.go" ] && core=core pkg=$pkg/core
  managers "$d" "sigs.k8s.io/cluster-api@$v" "capi-manager=$pkg" \
    cabpk-manager=sigs.k8s.io/cluster-api/bootstrap/kubeadm kcp-manager=sigs.k8s.io/cluster-api/controlplane/kubeadm
  manifests "$s" "$d" "$core" bootstrap/kubeadm controlplane/kubeadm
done
log "ready in $(( $(date +%s) - total )) s: $cache/capi $cache/capo $cache/orc"
echo "$cache"
