#!/usr/bin/env bash
# Start-up (issue 20 goal 5): whole-process time of `flatcar-capo version` and `oem show` on a
# small image against an empty Go program, best of N (default 30) runs interleaved in one loop
# (so load changes hit every command alike), with the load before and after; then the binary's
# size and package count and the heaviest package inits (GODEBUG=inittrace=1, best of 10 per
# package). Goal: < 10 ms. BASELINE=path/to/an/older/flatcar-capo adds its figures to the same
# run (e.g. a build of an earlier commit: git worktree + go build).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/startup
mkdir -p "$work/hello"
n=${1:-30}
# built as `make build` builds it (static, stripped); CGO_ENABLED=1 measures a plain `go build`'s
CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags '-s -w' -o "$work/flatcar-capo" ./cmd/flatcar-capo
printf 'package main\n\nfunc main() {}\n' >"$work/hello/main.go"
(cd "$work/hello" && { [ -f go.mod ] || go mod init hello >/dev/null 2>&1; } && go build -o "$work/empty" .)
# a small image with an ext4 OEM partition for `oem show`
img=$work/small.raw
if [ ! -f "$img" ]; then
  truncate -s 64M "$img.tmp"
  sgdisk -n 6:2048:+16M -t 6:0FC63DAF-8483-4772-8E79-3D69D8477DE4 -c 6:OEM "$img.tmp" >/dev/null
  truncate -s 16M "$work/oem.fs"; mkfs.ext4 -q -F -L OEM "$work/oem.fs"
  dd if="$work/oem.fs" of="$img.tmp" bs=1M seek=1 conv=notrunc status=none
  rm -f "$work/oem.fs"
  mv "$img.tmp" "$img"
fi
"$work/flatcar-capo" oem show "$img" >/dev/null # fails loudly if the fixture is wrong

declare -A cmds best
names=(empty version "oem show")
cmds[empty]="$work/empty"
cmds[version]="$work/flatcar-capo version"
cmds["oem show"]="$work/flatcar-capo oem show $img"
if [ -n "${BASELINE:-}" ]; then
  names+=("baseline version" "baseline oem show")
  cmds["baseline version"]="$BASELINE version"
  cmds["baseline oem show"]="$BASELINE oem show $img"
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq "$n"); do
  for k in "${names[@]}"; do
    s=$(date +%s%N); ${cmds[$k]} >/dev/null 2>&1 || true; e=$(date +%s%N)
    t=$(((e - s) / 1000))
    if [ -z "${best[$k]:-}" ] || [ "$t" -lt "${best[$k]}" ]; then best[$k]=$t; fi
  done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
ms() { printf '%d.%03d ms' $(($1 / 1000)) $(($1 % 1000)); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-34s %s\n' "empty Go program:" "$(ms "${best[empty]}")"
for k in version "oem show"; do
  v=${best[$k]}
  verdict="met"; [ "$v" -lt 10000 ] || verdict="NOT met"
  printf '%-34s %s  (%sx the empty program; goal < 10 ms: %s)\n' "flatcar-capo $k:" "$(ms "$v")" "$(ratio "$v" "${best[empty]}")" "$verdict"
  if [ -n "${BASELINE:-}" ]; then
    b=${best["baseline $k"]}
    printf '%-34s %s  (%sx; this binary is %sx faster)\n' "baseline $k:" "$(ms "$b")" "$(ratio "$b" "${best[empty]}")" "$(ratio "$b" "$v")"
  fi
done
echo "load: $load0 before, $load1 after; best of $n, interleaved"
size() { stat -c %s "$1" | awk '{ printf "%.1f MB", $1 / 1e6 }'; }
echo "binary: $(size "$work/flatcar-capo"), $(go list -deps ./cmd/flatcar-capo | wc -l) packages${BASELINE:+; baseline $(size "$BASELINE")}"
echo "heaviest package inits (ms, best of 10):"
for _ in $(seq 10); do GODEBUG=inittrace=1 "$work/flatcar-capo" version 2>&1 >/dev/null | awk '/^init /{print $2, $5}'; done |
  awk '{ if (!($1 in m) || $2 < m[$1]) m[$1] = $2 } END { for (k in m) { print m[k], k; s += m[k] } print s, "(all inits, sum of the bests)" }' |
  sort -rn | head -9 | sed 's/^/  /'
