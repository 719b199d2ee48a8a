#!/usr/bin/env bash
# containerd with the systemd cgroup driver (what kubeadm configures the kubelet for), the Flatcar
# way: a config in /etc/containerd and a drop-in pointing Flatcar's containerd.service at it
# (its ExecStart reads ${CONTAINERD_CONFIG}); and kubeadm.service ordered after containerd
# (image-builder #939: kubeadm raced containerd on Flatcar). Runs as root. The NODE_* paths come
# from pkg/node.
set -euo pipefail
die() { echo "flatcar-capo configure-containerd: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo configure-containerd: $*"; }

# set_under HEADER: SystemdCgroup = true in the TOML table HEADER (added at the end if absent;
# a second copy of an existing table header would make the file invalid).
set_under() {
  if grep -qxF "$1" <(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' "$conf"); then
    awk -v h="$1" '{ print; t = $0; gsub(/^[ \t]+|[ \t]+$/, "", t); if (t == h) print "  SystemdCgroup = true" }' \
      "$conf" >"$conf.new" && mv "$conf.new" "$conf"
  else
    printf '\n%s\n  SystemdCgroup = true\n' "$1" >>"$conf"
  fi
}

[ "$(id -u)" = 0 ] || die "must run as root"
: "${NODE_CONTAINERD_CONFIG:?}" "${NODE_CONTAINERD_DROPIN:?}" "${NODE_KUBEADM_DROPIN:?}"
conf=$NODE_CONTAINERD_CONFIG
install -d -m 0755 "$(dirname "$conf")" "$(dirname "$NODE_CONTAINERD_DROPIN")" "$(dirname "$NODE_KUBEADM_DROPIN")"

# Start from Flatcar's own config when there is one, so its other settings stay.
if [ ! -f "$conf" ] && [ -f /usr/share/containerd/config.toml ]; then
  cp /usr/share/containerd/config.toml "$conf"
fi
if [ -f "$conf" ] && grep -Eq '^[[:space:]]*SystemdCgroup[[:space:]]*=' "$conf"; then
  sed -Ei 's/^([[:space:]]*SystemdCgroup[[:space:]]*=[[:space:]]*).*/\1true/' "$conf"
elif [ -f "$conf" ] && grep -Eq '^[[:space:]]*version[[:space:]]*=[[:space:]]*3' "$conf"; then
  # containerd 2.x: the CRI runtime moved to io.containerd.cri.v1.runtime.
  hdr="[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]"
  set_under "$hdr"
else
  hdr='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]'
  if [ ! -f "$conf" ]; then
    cat >"$conf" <<'TOML'
# Written by flatcar-capo: containerd with the systemd cgroup driver.
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
TOML
  fi
  set_under "$hdr"
fi
chmod 0644 "$conf"
grep -Eq '^[[:space:]]*SystemdCgroup[[:space:]]*=[[:space:]]*true' "$conf" || die "could not set SystemdCgroup = true in $conf"

cat >"$NODE_CONTAINERD_DROPIN" <<UNIT
# flatcar-capo: containerd reads the config with SystemdCgroup = true.
[Service]
Environment=CONTAINERD_CONFIG=$conf
UNIT

# kubeadm.service comes with the node's Ignition (CABPK) at first boot; this drop-in is already
# there then and orders it after containerd.
cat >"$NODE_KUBEADM_DROPIN" <<'UNIT'
# flatcar-capo: kubeadm must not start before containerd (image-builder #939).
[Unit]
Requires=containerd.service
After=containerd.service
UNIT
chmod 0644 "$NODE_CONTAINERD_DROPIN" "$NODE_KUBEADM_DROPIN"

systemctl daemon-reload
systemctl enable containerd.service 2>&1 || die "systemctl enable containerd.service failed"
env_line=$(systemctl show -p Environment --value containerd.service)
case "$env_line" in
  *CONTAINERD_CONFIG="$conf"*) ;;
  *) die "containerd.service does not see CONTAINERD_CONFIG=$conf (Environment=$env_line)" ;;
esac
say "containerd: systemd cgroup driver ($conf); kubeadm.service ordered after containerd.service"
