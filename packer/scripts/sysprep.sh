#!/usr/bin/env bash
# Sysprep, the last provisioning step: the image must boot as a fresh machine. Checks the units we
# installed, removes what identifies this build VM (Ignition config, machine-id, SSH host keys,
# the payload), re-arms Ignition (/boot/flatcar/first_boot), masks automatic updates unless
# KEEP_UPDATES=1, and arranges for the build user to be removed at shutdown: it is still logged in
# over SSH now, and Packer's shutdown command (sudo systemctl poweroff) runs as that user.
# Runs as root. Environment: BUILD_USER (default: $SUDO_USER), KEEP_UPDATES, PAYLOAD_DIR.
set -euo pipefail
die() { echo "flatcar-capo sysprep: ERROR: $*" >&2; exit 1; }
say() { echo "flatcar-capo sysprep: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root"
user=${BUILD_USER:-${SUDO_USER:-}}
[ -n "$user" ] || die "BUILD_USER is not set and sudo did not say who called it"
[ "$user" != root ] || die "refusing to remove the root user (BUILD_USER=root)"
id "$user" >/dev/null 2>&1 || die "build user $user does not exist"

# 1. Our units, checked where they will run.
after=$(systemctl show -p After --value kubeadm.service)
case " $after " in
  *" containerd.service "*) say "kubeadm.service After: containerd.service (ok)" ;;
  *)
    if [ "$(systemctl show -p LoadState --value kubeadm.service)" = loaded ]; then
      die "kubeadm.service is not ordered after containerd.service (After=$after)"
    fi
    grep -qx 'After=containerd.service' /etc/systemd/system/kubeadm.service.d/10-flatcar-capo-containerd.conf ||
      die "the kubeadm.service drop-in ordering it after containerd.service is missing"
    say "kubeadm.service is not in the image (the node's Ignition adds it); its drop-in orders it after containerd.service"
    ;;
esac
verify=(/etc/systemd/system/kubelet.service)
frag=$(systemctl show -p FragmentPath --value kubeadm.service)
[ -n "$frag" ] && [ -f "$frag" ] && verify+=("$frag")
if ! out=$(systemd-analyze verify "${verify[@]}" 2>&1); then
  die "systemd-analyze verify ${verify[*]} failed: $out"
fi
[ -z "$out" ] || say "systemd-analyze verify: $out"
systemctl is-enabled --quiet kubelet.service || die "kubelet.service is not enabled"

# 2. Automatic updates would reboot nodes behind the cluster's back; CAPI rolls images instead.
if [ "${KEEP_UPDATES:-0}" != 1 ]; then
  systemctl mask update-engine.service locksmithd.service
  say "masked update-engine.service and locksmithd.service"
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

# 5. The build user goes last, when its SSH session is gone: a unit in /run (it vanishes with the
# VM) whose stop, at shutdown, runs after user.slice (all sessions) has stopped.
cat >/run/flatcar-capo-remove-build-user.sh <<SCRIPT
#!/bin/sh
# Runs at shutdown (ExecStop); its output goes to the console, which the build keeps (serial.log).
set -u
user='$user'
SCRIPT
cat >>/run/flatcar-capo-remove-build-user.sh <<'SCRIPT'
# Whatever of the user survived the session stop would make userdel refuse or leave files behind.
pkill -KILL -u "$user" 2>/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do pgrep -u "$user" >/dev/null 2>&1 || break; sleep 0.5; done
userdel --force --remove "$user" 2>&1 | grep -v 'mail spool'
if id "$user" >/dev/null 2>&1; then
  echo "flatcar-capo sysprep: ERROR: the build user $user could not be removed" >&2
else
  echo "flatcar-capo sysprep: removed the build user $user"
fi
rm -f /etc/ssh/ssh_host_* /etc/machine-id
sync
SCRIPT
chmod 0755 /run/flatcar-capo-remove-build-user.sh
cat >/run/systemd/system/flatcar-capo-remove-build-user.service <<'UNIT'
[Unit]
Description=flatcar-capo sysprep: remove the build user at shutdown
Before=user.slice systemd-user-sessions.service systemd-logind.service
RequiresMountsFor=/home /etc

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=/run/flatcar-capo-remove-build-user.sh
StandardOutput=journal+console
StandardError=journal+console
UNIT
systemctl daemon-reload
systemctl start flatcar-capo-remove-build-user.service
systemctl is-active --quiet flatcar-capo-remove-build-user.service || die "could not arm the build user removal"
say "build user $user will be removed at shutdown"
