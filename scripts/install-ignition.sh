#!/usr/bin/env bash
# Builds the stand-in guest's Ignition from the Go module proxy (no download sites here): upstream
# coreos/ignition v2.24.0 (the release today's Flatcar Ignition is based on) with what Flatcar's
# patches change for the stand-in's platforms (docs/ignition.md lists what still differs):
#   - QEMU's fw_cfg key is opt/org.flatcar-linux/config (upstream: opt/com.coreos/config);
#   - spec 2.x configs (CABPK renders 2.3 for Flatcar) are parsed by flatcar/ignition v0.36.2's
#     spec 2 parser and translated to spec 3 (scripts/ignition/flatcar_spec2.go.in);
#   - no SELinux relabelling, SSH keys written to ~/.ssh/authorized_keys.
# cgo with libblkid (libblkid-dev; when it is not installed, its .deb is fetched with
# `apt-get download` and unpacked into the build directory), linked statically so the busybox
# initramfs can run it. Cached: $CACHE/ignition/$IGNITION_VERSION/ignition with a stamp of this
# script and the patch, so a change to either rebuilds (--force rebuilds anyway). ($CACHE =
# ${XDG_CACHE_HOME:-~/.cache}/flatcar-capo.) The last stdout line is the binary's path.
set -euo pipefail
IGNITION_VERSION=${IGNITION_VERSION:-v2.24.0}
FLATCAR_V0_VERSION=v0.36.2
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo
dir=$cache/ignition/$IGNITION_VERSION
force=; [ "${1:-}" = --force ] && force=1
log() { echo "install-ignition: $(date -u +%H:%M:%S) $*" >&2; }
stamp=$(cat "$0" "$here/ignition/flatcar_spec2.go.in" | sha256sum | cut -c1-16)
mkdir -p "$dir"
exec 9>>"$dir/.build.lock"
flock 9
if [ -z "$force" ] && [ -x "$dir/ignition" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$dir/ignition"
  exit 0
fi
start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=1

# libblkid's header and static library. An unpacked .deb stays in one place ($dir/libblkid-dev):
# the cgo flags are part of Go's build cache keys, so a path that changes would recompile every
# package that depends on net or os/user (~40 min on a loaded machine instead of a few).
if [ ! -f /usr/include/blkid/blkid.h ] || [ ! -f /usr/lib/x86_64-linux-gnu/libblkid.a ]; then
  blkid_root=$dir/libblkid-dev
  if [ ! -f "$blkid_root/usr/include/blkid/blkid.h" ]; then
    (cd "$work" && apt-get download libblkid-dev >/dev/null 2>&1) ||
      { log "ERROR: libblkid-dev is not installed and apt-get download libblkid-dev failed (apt-get install libblkid-dev)"; exit 1; }
    dpkg-deb -x "$work"/libblkid-dev_*.deb "$blkid_root"
  fi
  export CGO_CFLAGS="-O2 -g -I$blkid_root/usr/include" CGO_LDFLAGS="-O2 -g -L$blkid_root/usr/lib/x86_64-linux-gnu"
fi

src=$(go mod download -json "github.com/coreos/ignition/v2@$IGNITION_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { log "ERROR: go mod download github.com/coreos/ignition/v2@$IGNITION_VERSION gave no directory"; exit 1; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
# Flatcar's fw_cfg key
sed -i 's#opt/com\.coreos/config#opt/org.flatcar-linux/config#g' internal/providers/qemu/qemu_fwcfg.go
grep -q 'opt/org.flatcar-linux/config/raw' internal/providers/qemu/qemu_fwcfg.go || { log "ERROR: the fw_cfg patch did not apply"; exit 1; }
# spec 2.x through flatcar/ignition's parser and the translation
cp "$here/ignition/flatcar_spec2.go.in" config/flatcar_spec2.go
perl -0pi -e 's/\treturn exp\.ParseCompatibleVersion\(raw\)/\tif cfg, rpt, err, ok := parseSpec2(raw); ok {\n\t\treturn cfg, rpt, err\n\t}\n\treturn exp.ParseCompatibleVersion(raw)/' config/config.go
grep -q parseSpec2 config/config.go || { log "ERROR: the spec 2 patch did not apply to config/config.go"; exit 1; }
# A template unit makes the files stage ask PID 1 for systemd's version over D-Bus (for a warning
# about systemd < 240); the stand-in's initramfs has no systemd: the check is skipped.
perl -0pi -e 's/if err := s\.warnOnOldSystemdVersion\(\); err != nil \{\n\t\t\treturn err\n\t\t\}/_ = s.warnOnOldSystemdVersion/' internal/exec/stages/files/units.go
grep -q '_ = s.warnOnOldSystemdVersion' internal/exec/stages/files/units.go || { log "ERROR: the systemd version check patch did not apply"; exit 1; }
go mod edit -require "github.com/flatcar/ignition@$FLATCAR_V0_VERSION"
distro=github.com/coreos/ignition/v2/internal/distro
nice -n 10 go build -trimpath -o "$work/ignition" -ldflags "-s -w -linkmode external -extldflags -static \
  -X github.com/coreos/ignition/v2/internal/version.Raw=$IGNITION_VERSION+flatcar-capo \
  -X $distro.selinuxRelabel=false -X $distro.writeAuthorizedKeysFragment=false" ./internal >&2
"$work/ignition" -version >&2
install -m 0755 "$work/ignition" "$dir/ignition.tmp" && mv "$dir/ignition.tmp" "$dir/ignition"
echo "$stamp" >"$dir/stamp"
log "built Ignition $IGNITION_VERSION (+ Flatcar's spec 2 and fw_cfg changes) in $(( $(date +%s) - start )) s"
echo "$dir/ignition"
