#!/usr/bin/env bash
# sysext create of a Kubernetes-sized sysext (kubelet 77 MiB, kubeadm 70 MiB, kubectl 57 MiB, as
# v1.33 ships them, cut from real Go binaries so they compress like the real ones) against
# mksquashfs -processors 2 on the same tree with the same compressor, level and block size, in
# the same run (interleaved, best of ROUNDS). Prints wall time, peak RSS, size, ratio and load.
# Usage: scripts/bench/sysext-create.sh (PAYLOAD_ONLY=1 makes the payload and stops)
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
[ -z "${PAYLOAD_ONLY:-}" ] || exit 0 # scripts/bench/codecs.sh only needs the payload
export SOURCE_DATE_EPOCH=1764547200
# best of $ROUNDS, ours and mksquashfs interleaved so both see the same load.
ROUNDS=${ROUNDS:-3}
run() { # output, command...: prints "seconds peakKiB"
  local out=$1; shift
  rm -f "$out"
  /usr/bin/time -o "$work/time" -f '%e %M' "$@" >/dev/null 2>&1
  tail -1 "$work/time"
}
best() { sort -n | head -1; }
# gzip 1 is flatcar-capo's default; zstd 3 is its zstd level.
for spec in gzip:1 zstd:3; do
  comp=${spec%:*} lvl=${spec#*:}
  ours=$work/ours-$comp-$lvl.raw mk=$work/mk-$comp-$lvl.raw
  flags=(--compression "$comp")
  [ "$comp" = gzip ] && flags+=(--compression-level "$lvl")
  ourcmd=("$bin" sysext create --kubernetes-version v1.33.4 --binaries "$payload" "${flags[@]}" --output-file "$ours")
  "${ourcmd[@]}" >/dev/null
  # The same tree, root-owned, for mksquashfs.
  rm -rf "$work/tree"; unsquashfs -q -no-progress -d "$work/tree" "$ours" >/dev/null
  mkcmd=(mksquashfs "$work/tree" "$mk" -comp "$comp" -Xcompression-level "$lvl" -b 131072 -all-root -noappend -no-progress -quiet -processors 2)
  : >"$work/ours.t"; : >"$work/mk.t"
  for _ in $(seq "$ROUNDS"); do
    run "$ours" "${ourcmd[@]}" >>"$work/ours.t"
    run "$mk" "${mkcmd[@]}" >>"$work/mk.t"
  done
  o=$(best <"$work/ours.t") m=$(best <"$work/mk.t")
  printf '%-40s %6ss  peak RSS %7s KiB  %10s bytes\n' "flatcar-capo sysext create ($comp $lvl)" "${o% *}" "${o#* }" "$(stat -c %s "$ours")"
  printf '%-40s %6ss  peak RSS %7s KiB  %10s bytes\n' "mksquashfs ($comp $lvl, -processors 2)" "${m% *}" "${m#* }" "$(stat -c %s "$mk")"
  awk -v o="${o% *}" -v m="${m% *}" -v c="$comp $lvl" 'BEGIN{printf "ratio (%s): %.2fx mksquashfs (best of '"$ROUNDS"', goal >= 1.0x)\n", c, m/o}'
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
du -sb "$payload" | awk '{printf "payload: %.0f MiB of binaries\n", $1/1048576}'
