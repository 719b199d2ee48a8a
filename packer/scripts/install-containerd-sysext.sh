#!/usr/bin/env bash
# Installs the containerd sysext flatcar-capo made from --containerd-version (checked on the
# host: $PAYLOAD_DIR/containerd/containerd-<version>-<arch>.raw) as the sysext method bakes it:
# stored in NODE_EXTENSIONS_STORE/containerd, linked as NODE_EXTENSIONS_DIR/containerd.raw, and
# Flatcar's own containerd-flatcar masked (linked to /dev/null). systemd-sysext is refreshed so
# that this VM already runs it (the image import that follows uses it). Runs as root; nothing
# to do without --containerd-version.
set -euo pipefail
die() { echo "flatcar-capo install-containerd-sysext: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo install-containerd-sysext: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root"
: "${PAYLOAD_DIR:?PAYLOAD_DIR is not set}" "${NODE_EXTENSIONS_STORE:?}" "${NODE_EXTENSIONS_DIR:?}"
shopt -s nullglob
raws=("$PAYLOAD_DIR"/containerd/containerd-*.raw)
if [ ${#raws[@]} -eq 0 ]; then
  say "no --containerd-version: Flatcar's own containerd stays"
  exit 0
fi
[ ${#raws[@]} -eq 1 ] || die "more than one containerd sysext in the payload: ${raws[*]}"
raw=${raws[0]}
name=$(basename "$raw")
version=${name#containerd-}
version=${version%-*.raw}
store=$NODE_EXTENSIONS_STORE/containerd
install -d -m 0755 "$store" "$NODE_EXTENSIONS_DIR"
install -m 0644 -o root -g root "$raw" "$store/$name"
ln -sfn "$store/$name" "$NODE_EXTENSIONS_DIR/containerd.raw"
ln -sfn /dev/null "$NODE_EXTENSIONS_DIR/containerd-flatcar.raw"
systemctl stop containerd.service 2>/dev/null || true
systemctl restart systemd-sysext.service || die "systemd-sysext did not merge the containerd sysext"
systemctl daemon-reload
got=$(/usr/bin/containerd --version 2>&1) || die "containerd does not run after the merge: $got"
case "$got" in
  *" v$version "* | *" $version "* | *" v$version" | *" $version") ;;
  *) die "after the merge /usr/bin/containerd says '$got', not $version" ;;
esac
say "containerd $version from $store/$name; containerd-flatcar masked"
