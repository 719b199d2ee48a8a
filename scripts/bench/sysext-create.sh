#!/usr/bin/env bash
# sysext create of a Kubernetes-sized sysext (kubelet 77 MiB, kubeadm 70 MiB, kubectl 57 MiB, as
# v1.33 ships them, cut from real Go binaries so they compress like the real ones) against
# mksquashfs on the same tree with the same compression, in the same run. Prints wall time,
# peak RSS and image size of each. Usage: scripts/bench/sysext-create.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/sysext-create
mkdir -p "$work"
bin=$work/flatcar-capo
go build -trimpath -o "$bin" ./cmd/flatcar-capo
payload=$work/payload
if [ ! -f "$payload/bin/kubectl" ]; then
  mkdir -p "$payload/bin"
  tools=$(go env GOTOOLDIR)
  for _ in 1 2 3; do cat "$bin" "$tools/compile" "$(command -v go)" "$tools/vet" "$tools/link"; done > "$work/pool"
  head -c $((77 << 20)) "$work/pool" > "$payload/bin/kubelet"
  tail -c +$((20 << 20)) "$work/pool" | head -c $((70 << 20)) > "$payload/bin/kubeadm" || true
  tail -c +$((40 << 20)) "$work/pool" | head -c $((57 << 20)) > "$payload/bin/kubectl" || true
  rm "$work/pool"
  chmod 755 "$payload"/bin/*
fi
export SOURCE_DATE_EPOCH=1764547200
measure() { # label, output, command...: one line with seconds, peak RSS and image size
  local label=$1 out=$2; shift 2
  rm -f "$out"
  local t
  /usr/bin/time -o "$work/time" -f '%e %M' "$@" >/dev/null 2>&1
  t=$(tail -1 "$work/time")
  printf '%-46s %6ss  peak RSS %7s KiB  %10s bytes\n' "$label" "${t% *}" "${t#* }" "$(stat -c %s "$out")"
}
# gzip 1 is flatcar-capo's default; zstd 3 is klauspost's default level, which go-diskfs uses.
for run in gzip:1 gzip:6 zstd:3; do
  comp=${run%:*} lvl=${run#*:}
  ours=$work/ours-$comp-$lvl.raw
  flags=(--compression "$comp")
  [ "$comp" = gzip ] && flags+=(--compression-level "$lvl")
  measure "flatcar-capo sysext create ($comp $lvl)" "$ours" \
    "$bin" sysext create --kubernetes-version v1.33.4 --binaries "$payload" "${flags[@]}" --output-file "$ours"
  # The same tree, root-owned, for mksquashfs.
  rm -rf "$work/tree"; unsquashfs -q -no-progress -d "$work/tree" "$ours" >/dev/null
  for procs in 2 1; do
    measure "mksquashfs ($comp $lvl, -processors $procs)" "$work/mk-$comp-$lvl-$procs.raw" \
      mksquashfs "$work/tree" "$work/mk-$comp-$lvl-$procs.raw" -comp "$comp" -Xcompression-level "$lvl" -b 131072 -all-root -noappend -no-progress -quiet -processors "$procs"
  done
done
uptime
du -sb "$payload" | awk '{printf "payload: %.0f MiB of binaries\n", $1/1048576}'
