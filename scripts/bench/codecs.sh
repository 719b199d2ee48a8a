#!/usr/bin/env bash
# The hand-written codecs against the libraries they replace, each on a whole command
# (docs/architecture.md, "Hand-written codecs"): one binary from this tree, one from the same tree
# with only that codec swapped for the library (scripts/bench/codecs/*.go.txt), interleaved,
# best of RUNS, wall and CPU (user+sys) and each against ours (under load, CPU decides):
#   inflater  flatcar-capo convert of a compressed qcow2 to raw  vs  klauspost/compress/flate
#   squashfs  flatcar-capo sysext create  at 96f44fe (ours)  vs  96f44fe^ (go-diskfs' writer), same payload
#   apimirror flatcar-capo version and lint  at f951c05 (mirror)  vs  f951c05^ (the upstream types)
# Usage: scripts/bench/codecs.sh [inflater squashfs apimirror]   (RUNS=N, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
repo=$PWD
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/codecs
mkdir -p "$work"
runs=${RUNS:-3}
cases=${*:-inflater squashfs apimirror}

# tree NAME REV: a copy of REV (HEAD: the work tree as committed) in $work/src-NAME.
tree() {
  rm -rf "$work/src-$1" && mkdir -p "$work/src-$1"
  git -C "$repo" archive "$2" | tar -x -C "$work/src-$1"
}
build() { (cd "$work/src-$1" && CGO_ENABLED=0 go build -trimpath -o "$work/bin-$1" ./cmd/flatcar-capo); }
# time1 CMD...: "wall cpu rss_mib" of one run.
time1() {
  /usr/bin/time -o "$work/t" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  awk '{printf "%s %.2f %d\n", $1, $2 + $3, $4 / 1024}' "$work/t"
}
# best: each column's minimum over the runs (under load the fastest wall and the least CPU are
# seldom the same run).
best() { awk 'NR == 1 || $1 < w {w = $1} NR == 1 || $2 < c {c = $2} NR == 1 || $3 < m {m = $3} END {print w, c, m}'; }
# compare LABEL SETUP NAME...: for each name, "SETUP prepare NAME" readies a run and "SETUP cmd NAME"
# sets the array cmd to the command to time; interleaved, one row per name.
compare() {
  local label=$1 setup=$2; shift 2
  local n
  for n in "$@"; do : >"$work/$n.t"; done
  for _ in $(seq "$runs"); do
    for n in "$@"; do "$setup" prepare "$n"; "$setup" cmd "$n"; time1 "${cmd[@]}" >>"$work/$n.t"; done
  done
  local fw fc
  read -r fw fc _ < <(best <"$work/$1.t")
  for n in "$@"; do
    read -r w c m < <(best <"$work/$n.t")
    awk -v l="$label" -v n="$n" -v w="$w" -v c="$c" -v m="$m" -v fw="$fw" -v fc="$fc" -v ld="$(cut -d' ' -f1 /proc/loadavg)" \
      'BEGIN{printf "| %s | %s | %.2f s | %.2f s | %d MiB | %.2fx | %.2fx | %s |\n", l, n, w, c, m, w/fw, c/fc, ld}'
  done
}
echo "| command | codec | wall (best of $runs) | CPU | peak RSS | wall / ours | CPU / ours | load |"
echo "|---|---|---|---|---|---|---|---|"

for c in $cases; do case $c in
inflater)
  tree ours HEAD && build ours
  tree flate HEAD
  sed -i 's/^func (r \*Reader) inflateFrom(/func (r *Reader) inflateFromOurs(/' "$work/src-flate/pkg/qcow2/reader.go"
  grep -q inflateFromOurs "$work/src-flate/pkg/qcow2/reader.go" || { echo "codecs.sh: inflateFrom not found in pkg/qcow2/reader.go" >&2; exit 1; }
  cp scripts/bench/codecs/libinflate.go.txt "$work/src-flate/pkg/qcow2/zz_libinflate.go"
  build flate
  # A 9 GiB image with ~1 GiB of binaries, text and zeros (convert.sh's), compressed as Flatcar publishes.
  IMAGE_ONLY=1 BENCH_DIR=${BENCH_DIR:-/var/tmp/flatcar-capo-bench} scripts/bench/convert.sh >/dev/null
  in=$work/convert-c010.qcow2
  [ -f "$in" ] || qemu-img convert -c -f raw -O qcow2 -o compat=0.10 "${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/convert/flatcar-9g.raw" "$in"
  inflater() {
    case $1 in
    prepare) rm -f "$work/out.raw"; cat "$in" >/dev/null ;;
    cmd) cmd=("$work/bin-$2" convert -q "$in" "$work/out.raw") ;;
    esac
  }
  compare "convert (compressed qcow2 $(du -m "$in" | cut -f1) MB -> raw, warm)" inflater ours flate
  "$work/bin-flate" convert -q "$in" "$work/lib.raw" && "$work/bin-ours" convert -q "$in" "$work/out.raw" &&
    cmp "$work/lib.raw" "$work/out.raw" || { echo "codecs.sh: the two raws differ" >&2; exit 1; }
  rm -f "$work/out.raw" "$work/lib.raw"
  ;;
squashfs)
  tree sq-ours 96f44fe && build sq-ours
  tree sq-diskfs 96f44fe^ && build sq-diskfs
  PAYLOAD_ONLY=1 scripts/bench/sysext-create.sh # its 204 MiB cut from Go binaries
  payload=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/sysext-create/payload
  export SOURCE_DATE_EPOCH=1764547200
  sq() {
    case $1 in
    prepare) rm -f "$work/k.raw"; cat "$payload"/bin/* >/dev/null ;;
    cmd) cmd=("$work/bin-$2" sysext create --kubernetes-version v1.33.4 --binaries "$payload" --output-file "$work/k.raw") ;;
    esac
  }
  compare "sysext create (204 MiB of binaries, gzip 1)" sq sq-ours sq-diskfs
  rm -f "$work/k.raw"
  ;;
apimirror)
  tree mirror f951c05 && build mirror
  tree upstream f951c05^ && build upstream
  docs=$work/lint.yaml # lint.sh's 1,000 documents: testdata/lint/good.yaml under 125 names
  : >"$docs"
  for i in $(seq -w 0 124); do sed "s/demo/demo$i/g" testdata/lint/good.yaml >>"$docs"; printf -- '---\n' >>"$docs"; done
  ver() { case $1 in prepare) : ;; cmd) cmd=(bash -c 'for _ in $(seq 20); do "$0" version || exit; done' "$work/bin-$2") ;; esac; }
  # Ten lints, so that the CPU seconds (counted in 10 ms steps) resolve a few percent.
  lint() { case $1 in prepare) : ;; cmd) cmd=(bash -c 'for _ in $(seq 10); do "$0" lint "$1" || exit; done' "$work/bin-$2" "$docs") ;; esac; }
  compare "20 x version" ver mirror upstream
  compare "10 x lint (1,000 documents)" lint mirror upstream
  ;;
*) echo "codecs.sh: unknown case $c (inflater squashfs apimirror)" >&2; exit 2 ;;
esac; done
echo "cores: $(nproc); $(date -u +%FT%H:%MZ); HEAD $(git -C "$repo" rev-parse --short HEAD)"
