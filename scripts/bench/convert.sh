#!/usr/bin/env bash
# convert against qemu-img, in the same run, on a ~9 GiB sparse Flatcar-layout raw image holding
# ~1 GiB of data (binaries, text, incompressible bytes, zeros):
#   raw -> qcow2, raw -> compressed qcow2, qcow2 -> raw (and compressed qcow2 -> raw).
# Prints wall times, peak RSS and ratios, warm (image in the page cache) and, as root, cold (page
# cache dropped before every run). The test image is cached under /var/tmp. FLATCAR_CAPO_BIN=PATH
# benchmarks a binary built elsewhere; MODES="warm cold" picks the passes; RUNS the runs per case;
# IMAGE_ONLY=1 makes the test image and stops.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/convert
mkdir -p "$work"
bin=${FLATCAR_CAPO_BIN:-$work/flatcar-capo}
[ -n "${FLATCAR_CAPO_BIN:-}" ] || go build -o "$bin" ./cmd/flatcar-capo || { echo "cannot build flatcar-capo" >&2; exit 1; }
img=$work/flatcar-9g.raw

mib=1048576
tmpimg=$img.partial
put() { # put OFFSET_MIB: write stdin into the image at that offset
  dd of="$tmpimg" bs=1M seek="$1" conv=notrunc iflag=fullblock status=none
}
files() { tar -cf - "$@" 2>/dev/null || true; } # a tar stream of real files; head may cut it short
build_image() {
  rm -f "$tmpimg"
  truncate -s 9G "$tmpimg"
  # Flatcar's partition table (names, types, order); USR-B stays empty as on a fresh image.
  sgdisk -q \
    -n 1:4096:+128M -t 1:C12A7328-F81F-11D2-BA4B-00A0C93EC93B -c 1:EFI-SYSTEM \
    -n 2:0:+2M -t 2:21686148-6449-6E6F-744E-656564454649 -c 2:BIOS-BOOT \
    -n 3:0:+1G -t 3:5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6 -c 3:USR-A \
    -n 4:0:+1G -t 4:5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6 -c 4:USR-B \
    -n 6:0:+128M -t 6:0FC63DAF-8483-4772-8E79-3D69D8477DE4 -c 6:OEM \
    -n 7:0:+64M -t 7:C95DC21A-DF0E-4340-8D7B-26CBFA9A03E0 -c 7:OEM-CONFIG \
    -n 9:0:0 -t 9:3884DD41-8582-4404-B9A8-E9B84F2DF50E -c 9:ROOT "$tmpimg"
  # ESP (starts at 2 MiB): kernel-like binaries.
  files /usr/lib/modules | head -c $((40 * mib)) | put 2
  # USR-A (starts at 132 MiB): ~700 MiB of libraries and programs.
  files /usr/lib/x86_64-linux-gnu /usr/bin | head -c $((700 * mib)) | put 132
  # OEM (starts at 2180 MiB): a little text.
  printf 'set oem_id="qemu"\nset linux_append="flatcar.autologin"\n' | put 2180
  # ROOT (starts at 2372 MiB): documentation text, incompressible data, explicit zeros, more text.
  files /usr/share/doc /usr/share/man | head -c $((150 * mib)) | put 2400
  head -c $((60 * mib)) /dev/urandom | put 3000
  head -c $((40 * mib)) /dev/zero | put 4000
  files /usr/share/perl /usr/share/python3 /usr/lib/python3 | head -c $((70 * mib)) | put 6000
  files /usr/share/i18n /usr/share/locale | head -c $((40 * mib)) | put 9000
  mv "$tmpimg" "$img"
}
[ -f "$img" ] || build_image
echo "image: $img, $(du -k --apparent-size "$img" | cut -f1) KiB virtual, $(du -k "$img" | cut -f1) KiB allocated"
[ -z "${IMAGE_ONLY:-}" ] || exit 0 # scripts/bench/inflate.sh only needs the image

# run CMD...: time one command, print "seconds maxrss_kib cpu_seconds". Warm: the input is read
# into the page cache first; cold: dirty pages are written and the page cache is dropped first.
# Either way earlier outputs are synced first, so no run pays for another's writeback.
mode=warm
run() {
  local t
  sync
  if [ "$mode" = cold ]; then echo 3 >/proc/sys/vm/drop_caches; else cat "$img" "${inputs[@]}" >/dev/null; fi
  t=$( { /usr/bin/time -f '%e %M %U %S' "$@" >/dev/null; } 2>&1 | tail -1)
  awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}' <<<"$t"
}
size_of() { du -k --apparent-size "$1" | cut -f1; }
alloc_of() { du -k "$1" | cut -f1; }
# best A B: the line with the smaller wall time
best() { if [ -z "$1" ] || awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN{exit !(b < a)}'; then echo "$2"; else echo "$1"; fi; }

runs=${RUNS:-3}
modes=${MODES:-warm cold}
[ "$(id -u)" = 0 ] || modes=${modes//cold/} # dropping the page cache needs root
rows=()
inputs=()
# bench LABEL INPUT OUT_OURS OUT_QEMU "OUR CMD" "QEMU CMD": best of $runs runs each, ours and
# qemu-img interleaved in the same run, since other work on the machine makes single runs noisy.
bench() {
  local label=$1 oo=$3 qo=$4 ours="" qemu="" i
  inputs=("$2")
  for i in $(seq "$runs"); do
    rm -f "$oo" "$qo"
    ours=$(best "$ours" "$(run bash -c "$5")")
    rm -f "$oo" "$qo"
    qemu=$(best "$qemu" "$(run bash -c "$6")")
  done
  read -r ow orss ocpu <<<"$ours"
  read -r qw qrss qcpu <<<"$qemu"
  rows+=("$mode|$label|$ow|$qw|$ocpu|$qcpu|$orss|$qrss")
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
q=$work/q.qcow2 qq=$work/qemu.qcow2 c=$work/c.qcow2 qc=$work/qemu-c.qcow2 r=$work/back.raw qr=$work/qemu-back.raw
# The qcow2 -> raw inputs are made by qemu-img once, so both tools read the same file.
inq=$work/in.qcow2 inc=$work/in-c.qcow2
[ -f "$inq" ] || qemu-img convert -f raw -O qcow2 "$img" "$inq"
[ -f "$inc" ] || qemu-img convert -c -f raw -O qcow2 "$img" "$inc"
for mode in $modes; do
  bench "raw -> qcow2" "$img" "$q" "$qq" "$bin convert -q $img $q" "qemu-img convert -f raw -O qcow2 $img $qq"
  bench "raw -> qcow2 compressed" "$img" "$c" "$qc" "$bin convert -q --compress $img $c" "qemu-img convert -c -f raw -O qcow2 $img $qc"
  bench "qcow2 -> raw" "$inq" "$r" "$qr" "$bin convert -q $inq $r" "qemu-img convert -f qcow2 -O raw $inq $qr"
  bench "compressed qcow2 -> raw" "$inc" "$r" "$qr" "$bin convert -q $inc $r" "qemu-img convert -f qcow2 -O raw $inc $qr"
done

# The outputs must be right, or the times mean nothing.
"$bin" convert -q "$img" "$q" >/dev/null && qemu-img check -q "$q" && qemu-img compare -q -f qcow2 -F raw "$q" "$img"
"$bin" convert -q --compress "$img" "$c" >/dev/null && qemu-img check -q "$c" && qemu-img compare -q -f qcow2 -F raw "$c" "$img"
"$bin" convert -q "$inq" "$r" >/dev/null && cmp "$r" "$img"
"$bin" convert -q "$inc" "$r" >/dev/null && cmp "$r" "$img"

echo
echo "cores: $(nproc), load average before: $load, qemu-img: $(qemu-img --version | head -1), best of $runs interleaved runs"
echo "| cache | case | flatcar-capo | qemu-img | speed-up | CPU s ours / qemu-img | peak RSS ours / qemu-img |"
echo "|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  IFS='|' read -r m label ow qw ocpu qcpu orss qrss <<<"$row"
  ratio=$(python3 -c "print('%.2fx' % ($qw / max($ow, 0.01)))")
  echo "| $m | $label | ${ow} s | ${qw} s | $ratio | $ocpu / $qcpu | $((orss / 1024)) / $((qrss / 1024)) MiB |"
done
rm -f "$q" "$qq" "$c" "$qc" "$r" "$qr"
