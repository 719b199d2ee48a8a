#!/usr/bin/env bash
# Makes a packer >= 1.10 with the QEMU plugin available. Debian gives packer 1.6.6 only, and no
# download site is reachable from CI, so when neither PATH nor the cache has one, this builds
# packer v1.12.0 and packer-plugin-qemu v1.0.9 from the Go module proxy (~2 min on 2 cores) and
# caches them:
#   $CACHE/packer/1.12.0/packer      the binary (what `flatcar-capo build --packer` takes)
#   $CACHE/packer/1.12.0/plugins/    its PACKER_PLUGIN_PATH; flatcar-capo uses a `plugins` directory
#                                    next to the packer binary when PACKER_PLUGIN_PATH is unset
#   $CACHE/bin/packer-1.12           a symlink to the binary
# ($CACHE = ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo). Idempotent: a rerun only checks.
# The last line on stdout is the path of the packer binary to use.
# Usage: scripts/install-packer.sh [--force]
set -euo pipefail

PACKER_VERSION=1.12.0
PLUGIN_VERSION=1.0.9
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
dir=$cache/packer/$PACKER_VERSION
bin=$dir/packer
plugins=$dir/plugins
link=$cache/bin/packer-1.12
force=${1:-}

log() { echo "install-packer: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# has_qemu_plugin PACKER [PLUGIN_PATH]: the packer answers and lists the qemu plugin.
has_qemu_plugin() {
  local out
  out=$(PACKER_PLUGIN_PATH=${2:-${PACKER_PLUGIN_PATH:-}} CHECKPOINT_DISABLE=1 "$1" plugins installed 2>/dev/null) || return 1
  grep -q 'github.com/hashicorp/qemu/packer-plugin-qemu' <<<"$out"
}

# version_ge_110 PACKER: `packer version` says 1.10 or later.
version_ge_110() {
  local v
  v=$(CHECKPOINT_DISABLE=1 "$1" version 2>/dev/null | sed -n '1s/^Packer v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  [ -n "$v" ] || return 1
  set -- $v
  [ "$1" -gt 1 ] || { [ "$1" -eq 1 ] && [ "$2" -ge 10 ]; }
}

if [ "$force" != --force ]; then
  # A packer on PATH that is new enough and has the plugin: nothing to do.
  if p=$(command -v packer) && version_ge_110 "$p" && has_qemu_plugin "$p"; then
    log "using $p ($("$p" version | head -1)) with the qemu plugin"
    echo "$p"; exit 0
  fi
  if [ -x "$bin" ] && version_ge_110 "$bin" && has_qemu_plugin "$bin" "$plugins"; then
    mkdir -p "$(dirname "$link")" && ln -sfn "$bin" "$link"
    log "cached: $bin (PACKER_PLUGIN_PATH=$plugins)"
    echo "$bin"; exit 0
  fi
fi

export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "go is not installed; it is needed to build packer $PACKER_VERSION (see https://go.dev/doc/install)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 CHECKPOINT_DISABLE=1

work=$(mktemp -d "${TMPDIR:-/tmp}/install-packer.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# build_module MODULE VERSION OUT [LDFLAGS]: go build a module's main package in a writable copy
# (go install refuses packer's module: its go.mod has a replace directive).
build_module() {
  local mod=$1 ver=$2 out=$3 ldflags=${4:-} src
  src=$(cd "$work" && GOFLAGS= go mod download -json "$mod@v$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || die "go mod download $mod@v$ver gave no module directory (is the Go module proxy reachable?)"
  local copy=$work/src/$(basename "$mod")
  mkdir -p "$work/src" && cp -r "$src" "$copy" && chmod -R u+w "$copy"
  log "building $mod v$ver (takes a minute or two)"
  (cd "$copy" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out" .) || die "go build of $mod v$ver failed"
}

start=$SECONDS
mkdir -p "$dir"
build_module github.com/hashicorp/packer "$PACKER_VERSION" "$work/bin/packer" \
  "-X github.com/hashicorp/packer/version.VersionPrerelease="
build_module github.com/hashicorp/packer-plugin-qemu "$PLUGIN_VERSION" "$work/bin/packer-plugin-qemu" \
  "-X github.com/hashicorp/packer-plugin-qemu/version.VersionPrerelease="

rm -rf "$plugins.new" && mkdir -p "$plugins.new"
PACKER_PLUGIN_PATH=$plugins.new "$work/bin/packer" plugins install --path "$work/bin/packer-plugin-qemu" \
  github.com/hashicorp/qemu >&2 || die "packer plugins install of the qemu plugin failed"
# Swap in only complete results: a rerun after an interrupted build starts over cleanly.
rm -rf "$plugins" && mv "$plugins.new" "$plugins"
install -m 0755 "$work/bin/packer" "$bin.new" && mv -f "$bin.new" "$bin"
has_qemu_plugin "$bin" "$plugins" || die "the built packer does not list the qemu plugin in $plugins"
mkdir -p "$(dirname "$link")" && ln -sfn "$bin" "$link"
log "built $("$bin" version | head -1) + packer-plugin-qemu v$PLUGIN_VERSION in $((SECONDS - start)) s: $bin (PACKER_PLUGIN_PATH=$plugins)"
echo "$bin"
