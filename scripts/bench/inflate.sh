#!/usr/bin/env bash
# compressed qcow2 -> raw (issue 20, goal 2): flatcar-capo convert against qemu-img convert on the
# same compressed qcow2 (compat 0.10, as Flatcar publishes), warm and cold (as root: page cache
# dropped before every run), ours and qemu-img interleaved, best of RUNS. Inputs: the image of
# scripts/bench/convert.sh (9 GiB, ~1 GiB of binaries, text, random bytes and zeros) and, when
# scripts/bench/sysext-build.sh has made it, its Flatcar-sized image. Checks that both raws are
# identical to the source. Prints ours, qemu-img's, the ratio and the load of each row.
# Usage: scripts/bench/inflate.sh (FLATCAR_CAPO_BIN=PATH: a binary built elsewhere; RUNS=N;
# MODES="warm cold")
set -euo pipefail
export FLATCAR_CAPO_REAL_TESTS=1 # the real tier: its benchmark runs the real tools (internal/testing/testutil)
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
root=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}
work=$root/inflate
mkdir -p "$work"
bin=${FLATCAR_CAPO_BIN:-$work/flatcar-capo}
[ -n "${FLATCAR_CAPO_BIN:-}" ] || go build -trimpath -o "$bin" ./cmd/flatcar-capo
IMAGE_ONLY=1 scripts/bench/convert.sh >/dev/null
images=("$root/convert/flatcar-9g.raw")
[ -f "$root/sysext/flatcar-9g.raw" ] && images+=("$root/sysext/flatcar-9g.raw")
runs=${RUNS:-3}
modes=${MODES:-warm cold}
[ "$(id -u)" = 0 ] || modes=${modes//cold/}
run() { # prints "wall cpu maxrss_kib"
  sync
  if [ "$mode" = cold ]; then echo 3 >/proc/sys/vm/drop_caches; else cat "$in" >/dev/null; fi
  /usr/bin/time -o "$work/t" -f '%e %U %S %M' "$@" >/dev/null 2>&1
  awk '{printf "%s %.2f %d %.2f %.2f\n", $1, $2 + $3, $4, $2, $3}' "$work/t"
}
minwall() { sort -n | head -1; }
echo "| input | cache | flatcar-capo | qemu-img | ratio (goal >= 1.5x) | CPU s ours / qemu-img (user+sys) | peak RSS ours / qemu-img | load |"
echo "|---|---|---|---|---|---|---|---|"
for raw in "${images[@]}"; do
  name=$(basename "$(dirname "$raw")")
  in=$work/$name-c010.qcow2
  [ -f "$in" ] || qemu-img convert -c -f raw -O qcow2 -o compat=0.10 "$raw" "$in"
  ours=$work/ours.raw theirs=$work/qemu.raw
  for mode in $modes; do
    : >"$work/o" ; : >"$work/q"
    for _ in $(seq "$runs"); do
      rm -f "$ours" "$theirs"; run "$bin" convert -q "$in" "$ours" >>"$work/o"
      rm -f "$ours" "$theirs"; run qemu-img convert -f qcow2 -O raw "$in" "$theirs" >>"$work/q"
    done
    read -r ow oc om ou os < <(minwall <"$work/o")
    read -r qw qc qm qu qs < <(minwall <"$work/q")
    awk -v n="$name ($(du -m "$in" | cut -f1) MB)" -v m="$mode" -v ow="$ow" -v qw="$qw" -v oc="$oc" -v qc="$qc" -v om="$om" -v qm="$qm" -v ou="$ou" -v os="$os" -v qu="$qu" -v qs="$qs" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
      'BEGIN{printf "| %s | %s | %.2f s | %.2f s | %.2fx | %s / %s (%s+%s / %s+%s) | %d / %d MiB | %s |\n", n, m, ow, qw, qw/ow, oc, qc, ou, os, qu, qs, om/1024, qm/1024, l}'
  done
  "$bin" convert -q "$in" "$ours" >/dev/null && qemu-img convert -f qcow2 -O raw "$in" "$theirs" && cmp "$ours" "$theirs" && cmp "$ours" "$raw" || { echo "raw outputs differ" >&2; exit 1; }
  echo "$name: raws identical; allocated ours / qemu-img: $(du -k "$ours" | cut -f1) / $(du -k "$theirs" | cut -f1) KiB"
  rm -f "$ours" "$theirs"
  # the decoder alone: every compressed cluster on one core, from memory (CPU seconds per pass)
  INFLATE_IMAGE=$in go test -run '^$' -bench BenchmarkInflateImage -benchtime 2x ./pkg/qcow2 |
    awk -v n="$name" '/^BenchmarkInflateImage/ {for (i = 1; i < NF; i++) if ($(i+1) == "cpu-s/pass") c = $i; else if ($(i+1) == "clusters") k = $i
      print n ": decoding its " k " compressed clusters on one core: " c " s CPU"}'
done
echo "cores: $(nproc), $(qemu-img --version | head -1), best of $runs interleaved runs"
