#!/usr/bin/env bash
# flatcar-capo upload against `openstack image create --file`, same qcow2, same Glance (a real
# Keystone + Glance from scripts/openstack.sh), same run. Prints wall time and peak RSS of each,
# and the ratio, for every size given (GiB; default "1 4"). Test images are cached under /var/tmp.
# Usage: scripts/bench/upload.sh [runs] [sizes...]    (median of `runs`, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
runs=${1:-3}; shift || true
sizes=${*:-1 4}
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/upload
mkdir -p "$work"
bin=$work/flatcar-capo
go build -trimpath -o "$bin" ./cmd/flatcar-capo

make_image() { # GiB -> path of a qcow2 of about that many bytes (incompressible data)
  local img=$work/bench-${1}g.qcow2
  if [ ! -s "$img" ]; then
    echo "generating $img (once)..." >&2
    head -c "$(($1 << 30))" /dev/urandom >"$work/tmp.raw"
    qemu-img convert -f raw -O qcow2 "$work/tmp.raw" "$img.tmp" && mv "$img.tmp" "$img"
    rm -f "$work/tmp.raw"
  fi
  echo "$img"
}

os_dir=$(mktemp -d /var/tmp/flatcar-capo-bench-openstack.XXXXXX)
trap 'scripts/openstack.sh down "$os_dir"; rm -rf "$os_dir"' EXIT
scripts/openstack.sh up "$os_dir" --owner $$ >/dev/null
export OS_CLIENT_CONFIG_FILE=$os_dir/clouds.yaml

# timed LABEL CMD...: appends "wall rss_kib" to $work/LABEL.times
timed() {
  local label=$1; shift
  /usr/bin/time -f '%e %M' -o "$work/$label.last" "$@" >/dev/null 2>"$work/$label.err" ||
    { cat "$work/$label.err" >&2; exit 1; }
  cat "$work/$label.last" >>"$work/$label.times"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
delete_all() { openstack --os-cloud local image list -f value -c ID | xargs -r openstack --os-cloud local image delete; }

printf '%-6s %-28s %9s %10s\n' size tool "wall s" "peak RSS"
for gib in $sizes; do
  img=$(make_image "$gib")
  cat "$img" >/dev/null # both start from a warm page cache
  rm -f "$work"/{ours,osc}.times
  for i in $(seq "$runs"); do
    timed ours "$bin" upload "$img" --name "bench-ours-$i" --cloud local
    timed osc openstack --os-cloud local image create --disk-format qcow2 --container-format bare \
      --file "$img" "bench-osc-$i"
    delete_all
  done
  ours=$(cut -d' ' -f1 "$work/ours.times" | median); ours_rss=$(cut -d' ' -f2 "$work/ours.times" | sort -n | tail -1)
  osc=$(cut -d' ' -f1 "$work/osc.times" | median); osc_rss=$(cut -d' ' -f2 "$work/osc.times" | sort -n | tail -1)
  printf '%-6s %-28s %9s %7d MiB\n' "${gib}G" "flatcar-capo upload" "$ours" $((ours_rss / 1024))
  printf '%-6s %-28s %9s %7d MiB\n' "${gib}G" "openstack image create" "$osc" $((osc_rss / 1024))
  awk -v a="$osc" -v b="$ours" -v g="$gib" 'BEGIN {printf "%-6s speed-up (openstack / ours): %.2fx\n", g "G", a / b}'
done
