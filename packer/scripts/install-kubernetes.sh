#!/usr/bin/env bash
# Installs the Kubernetes payload that flatcar-capo fetched and checked on the host:
#   $PAYLOAD_DIR/bin/{kubeadm,kubelet,kubectl}  -> $NODE_BIN_DIR (0755)
#   $PAYLOAD_DIR/crictl.tar.gz                   -> $NODE_BIN_DIR/crictl
#   $PAYLOAD_DIR/cni-plugins.tgz                 -> $NODE_CNI_BIN_DIR
#   $PAYLOAD_DIR/versions.env                    versions, shown in the log
#   $PAYLOAD_DIR/SHA256SUMS (optional)           checked first: the upload arrived intact
# and the kubelet unit with kubeadm's drop-in, enabled. Flatcar's /usr is read-only, hence /opt.
# Runs as root (Packer's shell provisioner with sudo). The NODE_* paths come from pkg/node.
set -euo pipefail
die() { echo "flatcar-capo install-kubernetes: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo install-kubernetes: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root"
: "${PAYLOAD_DIR:?PAYLOAD_DIR is not set}"
: "${NODE_BIN_DIR:?}" "${NODE_CNI_BIN_DIR:?}" "${NODE_KUBELET_UNIT:?}" "${NODE_KUBELET_DROPIN:?}" "${NODE_VOLUME_PLUGIN_DIR:?}"
: "${NODE_SERVICE_PATH_CONF:?}" "${NODE_SERVICE_PATH:?}"
bin=$NODE_BIN_DIR cni=$NODE_CNI_BIN_DIR unit=$NODE_KUBELET_UNIT dropin=$NODE_KUBELET_DROPIN
[ -d "$PAYLOAD_DIR" ] || die "payload directory $PAYLOAD_DIR is missing (the file upload failed?)"
cd "$PAYLOAD_DIR"
for f in bin/kubeadm bin/kubelet bin/kubectl crictl.tar.gz cni-plugins.tgz versions.env; do
  [ -s "$f" ] || die "payload file $PAYLOAD_DIR/$f is missing or empty"
done
if [ -f SHA256SUMS ]; then
  sha256sum --quiet -c SHA256SUMS || die "payload does not match SHA256SUMS (upload corrupted?)"
fi
# shellcheck disable=SC1091
. ./versions.env
say "installing Kubernetes ${KUBERNETES_VERSION:-?} (crictl ${CRICTL_VERSION:-?}, CNI plugins ${CNI_PLUGINS_VERSION:-?})"

install -d -m 0755 "$bin" "$cni" "$(dirname "$dropin")" \
  /etc/kubernetes/manifests /var/lib/kubelet
for b in kubeadm kubelet kubectl; do
  install -m 0755 "bin/$b" "$bin/$b"
done
tar -xzf crictl.tar.gz -C "$bin" --no-same-owner crictl || die "crictl.tar.gz holds no crictl"
chmod 0755 "$bin/crictl"
tar -xzf cni-plugins.tgz -C "$cni" --no-same-owner || die "cannot unpack cni-plugins.tgz"
chown -R root:root "$cni"
[ -n "$(ls -A "$cni")" ] || die "cni-plugins.tgz was empty"

# kubelet.service as kubernetes/release ships it, with Flatcar's /opt/bin path.
cat >"$unit" <<UNIT
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=$bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
UNIT

# kubeadm's drop-in: kubeadm writes the kubeconfigs, config.yaml and kubeadm-flags.env at join.
# The volume plugin dir must be writable, and Flatcar's /usr is not.
cat >"$dropin" <<UNIT
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
Environment="KUBELET_FLATCAR_ARGS=--volume-plugin-dir=$NODE_VOLUME_PLUGIN_DIR"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=$bin/kubelet \$KUBELET_KUBECONFIG_ARGS \$KUBELET_CONFIG_ARGS \$KUBELET_KUBEADM_ARGS \$KUBELET_FLATCAR_ARGS \$KUBELET_EXTRA_ARGS
UNIT
# $bin on every unit's PATH: CABPK's kubeadm.service runs /etc/kubeadm.sh, which calls plain
# `kubeadm` (and kubeadm calls crictl); systemd's default PATH has no /opt/bin.
install -d -m 0755 "$(dirname "$NODE_SERVICE_PATH_CONF")"
cat >"$NODE_SERVICE_PATH_CONF" <<CONF
[Manager]
DefaultEnvironment="PATH=$NODE_SERVICE_PATH"
CONF
chmod 0644 "$unit" "$dropin" "$NODE_SERVICE_PATH_CONF"

systemctl daemon-reload
systemctl enable kubelet.service
systemctl is-enabled --quiet kubelet.service || die "kubelet.service is not enabled after systemctl enable"
"$bin/kubeadm" version -o short >/dev/null 2>&1 || say "warning: $bin/kubeadm version did not run"
say "installed: $(cd "$bin" && echo kubeadm kubelet kubectl crictl), CNI: $(ls "$cni" | tr '\n' ' ')"
