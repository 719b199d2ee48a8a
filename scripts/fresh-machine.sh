#!/usr/bin/env bash
# A rehearsal of a fresh machine: the README's two commands, `make demo` then `bash .ci/run`, in a
# minimal Debian bookworm root made by mmdebstrap (minbase plus git and make, which a newcomer needs to
# clone and to run make; nothing else), with this machine's Go (/usr/local/go) copied in and the
# repository cloned into it. Run it before a change to an install step, a test's tools or the demo.
#
#   scripts/fresh-machine.sh [REPO [REF]]   (default: this repository, its committed HEAD)
#
# Needs root (mmdebstrap --mode=root, chroot, mounts) and the network to the Debian mirror of this
# machine's apt sources and to the Go module proxy, as a fresh machine does. The chroot gets /proc,
# /sys, /dev (with /dev/pts and /dev/kvm when present) and its own empty /tmp; everything mounted is
# unmounted and every process left in the root is ended on exit or interrupt. It prints each
# command's result and time; exit 0 only when both pass. FRESH_DIR (default a new directory under
# /var/tmp) holds the root; FRESH_KEEP=1 keeps it afterwards; FRESH_ONLY=demo|ci runs one command.
set -euo pipefail
# All in one function: bash reads a function whole, so an edit of this file cannot change a run.
main() {
  here=$(cd "$(dirname "$0")/.." && pwd)
  repo=${1:-$here}
  ref=${2:-HEAD}
  [ "$(id -u)" = 0 ] || { echo "fresh-machine: needs root (mmdebstrap --mode=root, chroot, mounts)" >&2; exit 2; }
  command -v mmdebstrap >/dev/null || { echo "fresh-machine: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
  [ -x /usr/local/go/bin/go ] || { echo "fresh-machine: needs Go at /usr/local/go (copied into the root)" >&2; exit 2; }
  sha=$(git -C "$repo" rev-parse --verify "$ref^{commit}") || { echo "fresh-machine: $ref is not a commit of $repo" >&2; exit 2; }
  
  work=${FRESH_DIR:-$(mktemp -d /var/tmp/flatcar-capo-fresh.XXXXXX)}
  root=$work/root
  mounted=()
  t0=$SECONDS
  stamp() { printf '[fresh-machine %s, +%ds] %s\n' "$(date -u +%H:%M:%S)" $((SECONDS - t0)) "$*"; }
  
  cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # Processes still running inside the root (servers a failed run left): only ours, found by their root.
    local pid
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
      [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] && kill -KILL "$pid" 2>/dev/null || true
    done
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
      umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null || true
    done
    if [ "${FRESH_KEEP:-0}" = 1 ]; then stamp "root kept in $root"; else rm -rf --one-file-system "$work"; fi
    stamp "exit $rc"
    exit "$rc"
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  
  # The mirrors of this machine's apt sources (deb822 or one-line), bookworm suites only: without
  # them mmdebstrap would pick its own.
  sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] && awk '$1 == "deb" && $3 ~ /^bookworm/ { print }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && awk '
        function flush() { if (types ~ /(^| )deb( |$)/) { n = split(suites, s, " "); split(uris, u, " ");
          for (i = 1; i <= n; i++) if (s[i] ~ /^bookworm/) print "deb " u[1] " " s[i] " " comps } types = uris = suites = comps = "" }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
        /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
        /^Components:/ { sub(/^Components:[ \t]*/, ""); comps = $0 }
        END { flush() }' "$f"
    done
  }
  mapfile -t mirrors < <(sources)
  ((${#mirrors[@]})) || { echo "fresh-machine: no bookworm suite in /etc/apt/sources.list*" >&2; exit 1; }
  
  stamp "repository $repo at $sha; root $root; mirrors: ${mirrors[*]}"
  s=$SECONDS
  mmdebstrap --mode=root --variant=minbase --include=git,make bookworm "$root" "${mirrors[@]}" >"$work/mmdebstrap.log" 2>&1 ||
    { tail -20 "$work/mmdebstrap.log" >&2; exit 1; }
  stamp "mmdebstrap: minimal bookworm root in $((SECONDS - s)) s ($(chroot "$root" dpkg-query -W | wc -l) packages)"
  echo fresh-machine >"$root/etc/hostname"
  cp -a /usr/local/go "$root/usr/local/go"
  git clone -q --no-hardlinks "$repo" "$root/src/flatcar-capo"
  git -C "$root/src/flatcar-capo" fetch -q "$repo" "$sha" 2>/dev/null || true
  git -C "$root/src/flatcar-capo" checkout -q --detach "$sha"
  chmod 1777 "$root/tmp"
  # This machine's own CAs (a network that intercepts TLS): the root's ca-certificates, which
  # install-deps installs, picks them up as it would on any machine of this network.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    stamp "copied this machine's local CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
  fi
  
  mount -t proc proc "$root/proc" && mounted+=("$root/proc")
  mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys" && mounted+=("$root/sys")
  mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" && mounted+=("$root/dev") # /dev/pts, /dev/shm, /dev/kvm, loop devices
  [ -e /dev/kvm ] || stamp "no /dev/kvm here (QEMU runs TCG)"
  
  # A login shell's environment, not this one's: only the Go proxy settings a fresh machine would be
  # given are passed through.
  env_in=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8)
  for v in GOPROXY GOSUMDB GONOSUMDB GOPRIVATE http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && env_in+=("$v=${!v}")
  done
  
  status=0 results=()
  run() { # NAME COMMAND: one README command in the root, its output indented, its result and time
    local name=$1 cmd=$2 s=$SECONDS rc=0
    stamp "start: $cmd"
    # In the background and waited for: bash runs the INT/TERM trap (and so the cleanup) at once
    # during a wait, not only after a foreground command ends.
    chroot "$root" /usr/bin/env -i "${env_in[@]}" bash -c "cd /src/flatcar-capo && $cmd" > >(sed -u 's/^/    /') 2>&1 &
    wait $! || rc=$?
    results+=("$(printf '%-14s exit %-3s %5d s (%d min %02d s)' "$name" "$rc" $((SECONDS - s)) $(((SECONDS - s) / 60)) $(((SECONDS - s) % 60)))")
    stamp "done: $cmd: exit $rc in $((SECONDS - s)) s"
    ((rc == 0)) || status=1
  }
  set +e
  case "${FRESH_ONLY:-}" in
    demo) run "make demo" "make demo" ;;
    ci) run "bash .ci/run" "bash .ci/run" ;;
    *) run "make demo" "make demo"; run "bash .ci/run" "bash .ci/run" ;;
  esac
  set -e
  stamp "results (commit $sha):"
  printf '    %s\n' "${results[@]}"
  exit $status
}
main "$@"
