#!/usr/bin/env bash
# Installs the container images and containerd settings flatcar-capo pulled and checked on the
# host ($PAYLOAD_DIR/images/root: the tree they take on the node): the OCI archive, the import
# unit (ordered before kubelet and kubeadm) and its script, certs.d, conf.d and proxy drop-ins.
# When the build VM runs a working containerd, the images are imported (and pinned) here and the
# archive removed; otherwise the import unit does it on the node's first boot. Runs as root.
# Nothing to do without $PAYLOAD_DIR/images (--no-preload-images and no containerd settings).
set -euo pipefail
die() { echo "flatcar-capo install-images: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo install-images: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root"
: "${PAYLOAD_DIR:?PAYLOAD_DIR is not set}"
tree=$PAYLOAD_DIR/images/root
if [ ! -d "$tree" ]; then
  say "no container images or containerd settings to install"
  exit 0
fi
cp -a --no-preserve=ownership "$tree/." / || die "cannot copy the image files into place"
# links: "TARGET PATH" per line (the import unit's multi-user.target.wants link).
while read -r target link; do
  [ -n "$link" ] || continue
  install -d -m 0755 "$(dirname "$link")"
  ln -sfn "$target" "$link"
done <"$PAYLOAD_DIR/images/links"
chown -R root:root /var/lib/flatcar-capo /opt/flatcar-capo 2>/dev/null || true
# The files that hold secrets (a proxy password, --node-registry-auth logins) stay root-only,
# whatever modes the upload to the build VM kept.
for f in /etc/flatcar-capo/proxy.env /etc/containerd/conf.d/20-flatcar-capo-auth.toml; do
  [ ! -e "$f" ] || { chown root:root "$f" && chmod 0600 "$f"; } || die "cannot make $f root-only"
done
systemctl daemon-reload
archive=/var/lib/flatcar-capo/images/images.tar
[ -f "$archive" ] || { say "containerd settings installed (no images)"; exit 0; }
n=$(grep -c . /var/lib/flatcar-capo/images/names || true)
if command -v ctr >/dev/null 2>&1 && systemctl start containerd.service 2>/dev/null && timeout 60 sh -c 'until ctr version >/dev/null 2>&1; do sleep 1; done'; then
  SECONDS=0
  /opt/flatcar-capo/bin/import-images || die "importing the images into the build VM's containerd failed"
  say "$n images imported into containerd's k8s.io namespace and pinned in $SECONDS s"
else
  say "$n images installed; no working containerd in the build VM, so the first boot imports them ($archive)"
fi
