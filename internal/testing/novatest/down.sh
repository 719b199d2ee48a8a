#!/bin/bash
# Stops everything the compute cloud in DIR started (internal/testing/novatest writes this file next to its
# state; Cloud.Stop runs it, and so does the watchdog when the test process dies first).
# Usage: down.sh DIR
set -u
d=$1
[ -f "$d/state" ] || exit 0
rm -f "$d/running"
ns=$(awk '$1=="netns"{print $2}' "$d/state")
# This cloud's router and DHCP namespaces (see the end): Stop recorded them ("qns"); when this
# runs as the watchdog, the agents' mount tables still list them.
qns=$(awk '$1=="qns"{print $2}' "$d/state")
[ -n "$ns" ] && for p in $(ip netns pids "$ns" 2>/dev/null); do
  qns="$qns $(awk '$5 ~ "^/run/netns/(qrouter|qdhcp|fip|snat)-" {print $5}' "/proc/$p/mountinfo" 2>/dev/null)"
done
# QEMU guests: libvirt daemonizes them out of its process group.
for f in "$d"/libvirt/run/qemu/*.pid; do [ -s "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
# The daemons, last started first; SIGKILL what is left after 10 s.
groups=$(tac "$d/state" | awk '$1=="pgid"{print $2}')
for g in $groups; do kill -TERM -- "-$g" 2>/dev/null; done
for _ in $(seq 100); do
  alive=
  for g in $groups; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
  [ -z "$alive" ] && break
  sleep 0.1
done
for g in $groups; do kill -KILL -- "-$g" 2>/dev/null; done
# What the daemons started in sessions of their own (privsep helpers, dnsmasq, haproxy,
# keepalived, QEMU): every process whose command line names this directory, and any process
# still in the namespace.
# One grep over every command line: a fork or two per process took minutes at nice 19 under load.
sweep() {
  local f p
  for f in $(grep -laF -- "$d" /proc/[0-9]*/cmdline 2>/dev/null); do
    p=${f#/proc/}
    p=${p%/cmdline}
    [ "$p" = $$ ] && continue
    kill -KILL "$p" 2>/dev/null
  done
  # Not the caller (Cloud.Stop's test process): a thread of it may still be in the namespace.
  [ -n "$ns" ] && for p in $(ip netns pids "$ns" 2>/dev/null); do [ "$p" = "$PPID" ] || kill -KILL "$p" 2>/dev/null; done
}
sweep; sleep 0.5; sweep
# Keystone + Glance (scripts/openstack.sh).
os=$(awk '$1=="openstack"{print $2}' "$d/state")
[ -n "$os" ] && [ -n "$(awk '$1=="script"{print $2}' "$d/state")" ] && \
  "$(awk '$1=="script"{print $2}' "$d/state")" down "$os" >/dev/null 2>&1
# The namespace (its bridges, taps, VXLAN and iptables rules go with it), and the names of this
# cloud's routers' and DHCP servers' namespaces: the agents mounted those in mount namespaces of
# their own, so the host holds only empty files. Only this cloud's: another cloud running at the
# same time has files there too, and an unlink would detach its namespaces from its agents.
[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
for f in $(printf '%s\n' $qns | sort -u); do
  [ -e "$f" ] && ! mountpoint -q "$f" && rm -f "$f"
done
exit 0
