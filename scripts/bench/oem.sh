#!/usr/bin/env bash
# oem set on a Flatcar-layout image with a 1 GiB btrfs OEM inside a ~9 GiB sparse file, against
# the same edit with libguestfs (guestfish) and against the rebuild path (btrfs restore +
# mkfs.btrfs --rootdir + dd back), in the same run. Prints wall times, peak RSS and ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/oem
mkdir -p "$work"
bin=$PWD/bin/flatcar-capo
[ -x "$bin" ] || make build >/dev/null
img=$work/flatcar-9g.raw
[ -f "$img" ] || go run ./scripts/mkdisk -variant btrfs -oem-size-mib 1024 -size-mib 9216 -o "$img"
read -r oemStart oemSize < <("$bin" oem show "$img" >/dev/null && "$bin" inspect "$img" -o json | python3 -c '
import json,sys
p=[p for p in json.load(sys.stdin)["partitions"] if p["name"]=="OEM"][0]
print(p["start"], p["size"])')

runs=${RUNS:-30}
# Median wall time and max RSS of `oem set`, resetting the id before each run so every run writes.
ours=()
rss=0
for i in $(seq "$runs"); do
  "$bin" oem set "$img" --id qemu --keep-autologin --allow-unknown-id >/dev/null
  t=$( { /usr/bin/time -f '%e %M' "$bin" oem set "$img" --id openstack >/dev/null; } 2>&1 | tail -1)
  ours+=("${t% *}"); r=${t#* }; (( r > rss )) && rss=$r
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ourMed=$(median "${ours[@]}")
# /usr/bin/time has 10 ms resolution: also measure with hyperfine when present.
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/hf.json" \
    --prepare "$bin oem set $img --id qemu --keep-autologin" "$bin oem set $img --id openstack" >/dev/null
  ourMed=$(python3 -c "import json;print('%.4f'%json.load(open('$work/hf.json'))['results'][0]['median'])")
fi
echo "flatcar-capo oem set: median ${ourMed}s over $runs runs, peak RSS ${rss} KiB"

gf=NA; gfRSS=NA
if command -v guestfish >/dev/null; then
  export LIBGUESTFS_BACKEND=direct LIBGUESTFS_BACKEND_SETTINGS=force_tcg
  t=$( { /usr/bin/time -f '%e %M' guestfish --rw -a "$img" -m /dev/sda6 write /grub.cfg 'set oem_id="openstack"
set linux_append=""
' ; } 2>&1 | tail -1)
  gf=${t% *}; gfRSS=${t#* }
  echo "guestfish write:      ${gf}s, peak RSS ${gfRSS} KiB (of guestfish itself; the appliance VM is extra)"
fi

# Rebuild path: extract the OEM files, edit, recreate the filesystem, write it back.
rebuild() {
  rm -rf "$work/tree" "$work/oem.btrfs"; mkdir -p "$work/tree"
  dd if="$img" of="$work/oem.part" bs=1M skip=$((oemStart/1048576)) count=$((oemSize/1048576)) conv=sparse status=none
  btrfs restore -i "$work/oem.part" "$work/tree" >/dev/null 2>&1
  printf 'set oem_id="openstack"\nset linux_append=""\n' > "$work/tree/grub.cfg"
  truncate -s "$oemSize" "$work/oem.btrfs"
  mkfs.btrfs -q --mixed -m single -d single -L OEM --rootdir "$work/tree" -f "$work/oem.btrfs" >/dev/null
  dd if="$work/oem.btrfs" of="$img" bs=1M seek=$((oemStart/1048576)) conv=notrunc,sparse status=none
}
export -f rebuild; export img work oemStart oemSize
t=$( { /usr/bin/time -f '%e %M' bash -c rebuild; } 2>&1 | tail -1)
rb=${t% *}; rbRSS=${t#* }
echo "rebuild (btrfs restore + mkfs.btrfs --rootdir + dd): ${rb}s, peak RSS ${rbRSS} KiB"
"$bin" oem set "$img" --id openstack >/dev/null   # back to a btrfs OEM our way

ratio() { python3 -c "a='$1';b='$2';print('n/a' if 'NA' in (a+b) else '%.0fx' % (float(a)/max(float(b),1e-4)))"; }
echo
echo "| operation | wall time | peak RSS | ratio vs flatcar-capo |"
echo "|---|---|---|---|"
echo "| flatcar-capo oem set (median of $runs) | ${ourMed} s | $((rss/1024)) MiB | 1x |"
echo "| guestfish --rw write | ${gf} s | ${gfRSS} KiB | $(ratio "$gf" "$ourMed") slower |"
echo "| btrfs restore + mkfs.btrfs --rootdir + dd | ${rb} s | ${rbRSS} KiB | $(ratio "$rb" "$ourMed") slower |"
