#!/usr/bin/env bash
# Sysprep, the last provisioning step: the image must boot as a fresh machine. Checks the units we
# installed, removes what identifies this build VM (Ignition config, machine-id, SSH host keys,
# the payload), re-arms Ignition (/boot/flatcar/first_boot), masks automatic updates unless
# KEEP_UPDATES=1, and leaves the build user's removal to Packer's shutdown command: the user is
# logged in over SSH now, and that command is the last thing Packer runs as it.
# Runs as root. Environment: BUILD_USER (default: $SUDO_USER), KEEP_UPDATES, PAYLOAD_DIR, and the
# NODE_* paths and units of pkg/node.
set -euo pipefail
die() { echo "flatcar-capo sysprep: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo sysprep: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root"
user=${BUILD_USER:-${SUDO_USER:-}}
[ -n "$user" ] || die "BUILD_USER is not set and sudo did not say who called it"
[ "$user" != root ] || die "refusing to remove the root user (BUILD_USER=root)"
id "$user" >/dev/null 2>&1 || die "build user $user does not exist"
: "${NODE_KUBEADM_DROPIN:?}" "${NODE_KUBELET_UNIT:?}" "${NODE_UPDATE_UNITS:?}"

# 1. Our units, checked where they will run.
after=$(systemctl show -p After --value kubeadm.service)
case " $after " in
  *" containerd.service "*) say "kubeadm.service After: containerd.service (ok)" ;;
  *)
    if [ "$(systemctl show -p LoadState --value kubeadm.service)" = loaded ]; then
      die "kubeadm.service is not ordered after containerd.service (After=$after)"
    fi
    grep -qx 'After=containerd.service' "$NODE_KUBEADM_DROPIN" ||
      die "the kubeadm.service drop-in ordering it after containerd.service is missing"
    say "kubeadm.service is not in the image (the node's Ignition adds it); its drop-in orders it after containerd.service"
    ;;
esac
verify=("$NODE_KUBELET_UNIT")
frag=$(systemctl show -p FragmentPath --value kubeadm.service)
[ -n "$frag" ] && [ -f "$frag" ] && verify+=("$frag")
if ! out=$(systemd-analyze verify "${verify[@]}" 2>&1); then
  die "systemd-analyze verify ${verify[*]} failed: $out"
fi
[ -z "$out" ] || say "systemd-analyze verify: $out"
systemctl is-enabled --quiet kubelet.service || die "kubelet.service is not enabled"

# 2. Automatic updates would reboot nodes behind the cluster's back; CAPI rolls images instead.
if [ "${KEEP_UPDATES:-0}" != 1 ]; then
  # shellcheck disable=SC2086 # a list of unit names
  systemctl mask $NODE_UPDATE_UNITS
  say "masked $NODE_UPDATE_UNITS"
fi

# 3. What identifies this VM or this build.
rm -f /oem/config.ign /usr/share/oem/config.ign
rm -f /etc/ssh/ssh_host_*
rm -f /etc/machine-id /var/lib/dbus/machine-id
rm -rf "${PAYLOAD_DIR:-/tmp/flatcar-capo/payload}"
rm -f "/etc/sudoers.d/$user" /etc/sudoers.d/flatcar-capo-build 2>/dev/null || true

# 4. Ignition runs again on the real first boot: Flatcar's initrd looks for this flag on the ESP.
mountpoint -q /boot || die "/boot is not a mount point: the ESP must be mounted there to set /boot/flatcar/first_boot"
mkdir -p /boot/flatcar
touch /boot/flatcar/first_boot
sync -f /boot/flatcar/first_boot
say "armed /boot/flatcar/first_boot"

# 5. The build user goes last, in Packer's shutdown command (sudo sh /run/flatcar-capo-shutdown.sh):
# root by then, it removes the user (whose SSH session is the one running it) and powers off. The
# result goes to the kernel log, so the build VM's console (serial.log) shows it; pkg/packer fails
# the build on an ERROR there. /run vanishes with the VM.
cat >/run/flatcar-capo-shutdown.sh <<SCRIPT
#!/bin/sh
set -u
user='$user'
SCRIPT
cat >>/run/flatcar-capo-shutdown.sh <<'SCRIPT'
msg() { echo "flatcar-capo sysprep: $*"; echo "flatcar-capo sysprep: $*" >/dev/kmsg 2>/dev/null || true; }
userdel --force --remove "$user" 2>&1 | grep -v -e 'mail spool' -e 'currently used by process' >&2
if id "$user" >/dev/null 2>&1 || [ -e "/home/$user" ]; then
  msg "ERROR: the build user $user could not be removed"
else
  msg "removed the build user $user"
fi
rm -f /etc/ssh/ssh_host_* /etc/machine-id
sync
exec systemctl poweroff
SCRIPT
chmod 0755 /run/flatcar-capo-shutdown.sh
say "build user $user goes with the shutdown command"
