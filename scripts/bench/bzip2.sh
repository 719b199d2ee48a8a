#!/usr/bin/env bash
# Times pkg/bzip2 against bzip2 -dc and lbzip2 -dc -n2 on a file shaped like a
# Flatcar release: an lbzip2 -9 compressed qcow2 (zlib clusters) of a disk image
# holding shared libraries, binaries, text and zeros. The file is cached.
# Usage: scripts/bench/bzip2.sh [runs]   (best wall time of `runs`, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
cache=${BZIP2_BENCH_DIR:-/var/tmp/flatcar-capo-bench}
src=$cache/release-like.img.bz2
mkdir -p "$cache"

make_input() {
  local raw=$cache/disk.raw qcow=$cache/disk.qcow2 off=1 dir recs
  rm -f "$raw" && truncate -s 4G "$raw"
  # Each payload lands at its own MiB offset, with sparse zeros between.
  for dir in /usr/lib/x86_64-linux-gnu /usr/share/doc /usr/bin /usr/share/locale /usr/local/go/pkg; do
    [ -d "$dir" ] || continue
    recs=$(tar cf - "$dir" 2>/dev/null |
      dd of="$raw" bs=1M seek="$off" conv=notrunc iflag=fullblock 2>&1 |
      awk -F'[+ ]' '/records out/ {print $1 + $2}')
    off=$((off + recs + 37))
  done
  qemu-img convert -c -O qcow2 "$raw" "$qcow"
  rm -f "$raw"
  sha256sum < "$qcow" | cut -d' ' -f1 > "$src.sha256"
  lbzip2 -9 -n2 < "$qcow" > "$src.tmp"
  mv "$src.tmp" "$src"
  rm -f "$qcow"
}

[ -s "$src" ] && [ -s "$src.sha256" ] || { echo "generating $src (once)..." >&2; make_input; }
go build -o "$cache/bunzip2" ./scripts/bench/bunzip2

# Correctness first (untimed): our output must hash to the original qcow2.
got=$("$cache/bunzip2" < "$src" | sha256sum | cut -d' ' -f1)
[ "$got" = "$(cat "$src.sha256")" ] || { echo "pkg/bzip2 output differs from the original" >&2; exit 1; }
out_bytes=$("$cache/bunzip2" < "$src" | wc -c)
in_bytes=$(stat -c %s "$src")

# best <cmd...>: best wall time and the peak RSS (KiB) of that run, over $runs runs.
best() {
  local t=999999 m=0 line
  for _ in $(seq "$runs"); do
    line=$(/usr/bin/time -f '%e %M' "$@" < "$src" 2>&1 >/dev/null | tail -n1)
    if awk -v a="${line% *}" -v b="$t" 'BEGIN{exit !(a<b)}'; then t=${line% *}; m=${line#* }; fi
  done
  echo "$t $m"
}

awk -v s="$src" -v i="$in_bytes" -v o="$out_bytes" -v c="$(nproc)" \
  'BEGIN{printf "input %s: %.1f MB compressed, %.1f MB decompressed, %d cores\n", s, i/1e6, o/1e6, c}'
declare -A wall rss
names=("bzip2 -dc" "lbzip2 -dc -n2" "pkg/bzip2")
read -r wall[0] rss[0] < <(best bzip2 -dc)
read -r wall[1] rss[1] < <(best lbzip2 -dc -n2)
read -r wall[2] rss[2] < <(best "$cache/bunzip2")
printf '%-16s %8s %14s %14s %10s\n' tool wall_s out_MB/s vs_lbzip2 peak_RSS_MB
for i in 0 1 2; do
  awk -v n="${names[$i]}" -v t="${wall[$i]}" -v m="${rss[$i]}" -v ob="$out_bytes" -v l="${wall[1]}" \
    'BEGIN{printf "%-16s %8.2f %14.1f %13.2fx %10.1f\n", n, t, ob/1e6/t, l/t, m/1024}'
done
