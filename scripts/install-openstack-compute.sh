#!/usr/bin/env bash
# Installs OpenStack compute from Debian 12's packages (Zed) for `make capo-proof` (issue 46):
# Placement, Nova (api, conductor, scheduler, compute with libvirt; virt_type=qemu, i.e. TCG),
# Neutron (ML2 is inside neutron-server; Linux bridge agent, DHCP, L3 and metadata agents),
# RabbitMQ, MariaDB (Nova and Neutron write from several processes: sqlite refuses them "database is
# locked"), libvirt, and genisoimage for Nova's ISO config drive (no Nova package depends on it).
# Keystone and Glance come from the test profile (scripts/install-deps.sh). Idempotent: packages
# already present are not asked for again. No service is started: PID 1 is not systemd here and the
# harness (internal/testing/novatest) starts every daemon itself, so a policy-rc.d refuses start-up during install.
# Usage: scripts/install-openstack-compute.sh [--list]
set -euo pipefail
# The packages that provide a tool internal/testing/testutil requires are named even when another pulls them in
# (nova-compute, nova-common, python3-placement, mariadb-server-core, mariadb-client-core, neutron-common,
# libvirt-daemon, haproxy, dnsmasq-base, iproute2).
pkgs=(nova-api nova-conductor nova-scheduler nova-compute nova-compute-kvm nova-common placement-api python3-placement
  neutron-server neutron-linuxbridge-agent neutron-dhcp-agent neutron-l3-agent neutron-metadata-agent neutron-common
  rabbitmq-server libvirt-daemon-system libvirt-daemon libvirt-clients genisoimage haproxy dnsmasq-base iproute2
  mariadb-server mariadb-server-core mariadb-client-core python3-pymysql ebtables iptables bridge-utils conntrack sudo python3-openstackclient keystone glance uwsgi-plugin-python3 qemu-utils)
if [ "${1:-}" = --list ]; then printf '%s\n' "${pkgs[@]}"; exit 0; fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
# Exit 101 from policy-rc.d is "action forbidden": invoke-rc.d starts nothing. Keep an existing one.
added_policy=false
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  added_policy=true
fi
trap '$added_policy && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT
echo "install-openstack-compute: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
