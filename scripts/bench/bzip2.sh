#!/usr/bin/env bash
# Times fetch's bzip2 decoder (github.com/dsnet/compress/bzip2, scripts/bench/bunzip2) against
# bzip2 -dc and lbzip2 -dc -n2 on a file shaped like a Flatcar release: an lbzip2 -9 compressed
# qcow2 (zlib clusters) of a disk image holding shared libraries, binaries, text and zeros. The
# file is cached. OLD_REV=05a5c8b adds the parallel pkg/bzip2 of that commit (removed by issue 47)
# to the same run.
# Usage: scripts/bench/bzip2.sh [runs]   (best wall time of `runs`, default 3;
# BZIP2_BENCH_DIR overrides the cache directory /var/tmp/flatcar-capo-bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in bzip2 lbzip2 qemu-img /usr/bin/time go; do
  command -v "$tool" >/dev/null || { echo "bzip2.sh: $tool is needed (scripts/install-deps.sh bench)" >&2; exit 1; }
done
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
  stat -c %s "$qcow" > "$src.size"
  lbzip2 -9 -n2 < "$qcow" > "$src.tmp"
  mv "$src.tmp" "$src"
  rm -f "$qcow"
}

[ -s "$src" ] && [ -s "$src.sha256" ] || { echo "generating $src (once)..." >&2; make_input; }
go build -o "$cache/bunzip2" ./scripts/bench/bunzip2
names=("bzip2 -dc" "lbzip2 -dc -n2" "dsnet (fetch)")
cmds=("bzip2 -dc" "lbzip2 -dc -n2" "$cache/bunzip2")
if [ -n "${OLD_REV:-}" ]; then # the old parallel decoder, built from its commit
  old=$(mktemp -d)
  git archive "$OLD_REV" | tar -x -C "$old"
  (cd "$old" && go build -o "$cache/bunzip2-old" ./scripts/bench/bunzip2)
  rm -rf "$old"
  names+=("pkg/bzip2 at $OLD_REV"); cmds+=("$cache/bunzip2-old")
fi

# Correctness first (untimed): every Go decoder's output must hash to the original qcow2.
for c in "${cmds[@]:2}"; do
  got=$($c < "$src" | sha256sum | cut -d' ' -f1)
  [ "$got" = "$(cat "$src.sha256")" ] || { echo "$c: output differs from the original" >&2; exit 1; }
done
[ -s "$src.size" ] || "$cache/bunzip2" < "$src" | wc -c > "$src.size"
out_bytes=$(cat "$src.size")
in_bytes=$(stat -c %s "$src")

declare -A wall cpu rss
for i in "${!cmds[@]}"; do wall[$i]=999999; done
load0=$(cut -d' ' -f1 /proc/loadavg)
# Runs alternate between the tools so that other load on the machine hits
# all of them alike; each tool keeps its best wall time (and that run's CPU
# time and peak RSS).
for _ in $(seq "$runs"); do
  for i in "${!cmds[@]}"; do
    # shellcheck disable=SC2086 # cmds hold a command and its flags
    read -r e u s m < <(/usr/bin/time -f '%e %U %S %M' ${cmds[$i]} < "$src" 2>&1 >/dev/null | tail -n1)
    if awk -v a="$e" -v b="${wall[$i]}" 'BEGIN{exit !(a<b)}'; then
      wall[$i]=$e; cpu[$i]=$(awk -v u="$u" -v s="$s" 'BEGIN{print u+s}'); rss[$i]=$m
    fi
  done
done
load1=$(cut -d' ' -f1 /proc/loadavg)

awk -v s="$src" -v i="$in_bytes" -v o="$out_bytes" -v c="$(nproc)" -v r="$runs" -v l0="$load0" -v l1="$load1" \
  'BEGIN{printf "input %s: %.1f MB compressed, %.1f MB decompressed; %d cores, best of %d, load average %s -> %s\n", s, i/1e6, o/1e6, c, r, l0, l1}'
printf '%-22s %8s %10s %12s %8s %12s %8s\n' tool wall_s out_MB/s speed_vs_lbz cpu_s cpu_vs_lbz rss_MB
for i in "${!cmds[@]}"; do
  awk -v n="${names[$i]}" -v t="${wall[$i]}" -v c="${cpu[$i]}" -v m="${rss[$i]}" -v ob="$out_bytes" \
    -v lt="${wall[1]}" -v lc="${cpu[1]}" \
    'BEGIN{printf "%-22s %8.2f %10.1f %11.2fx %8.2f %11.2fx %8.1f\n", n, t, ob/1e6/t, lt/t, c, lc/c, m/1024}'
done
