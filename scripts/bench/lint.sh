#!/usr/bin/env bash
# lint on a 1,000-document manifest (testdata/lint/good.yaml repeated 125 times under distinct
# names). There is no other CAPO/Ignition linter to run against, so the ratio is against the
# issue's target of 1 s. Prints median wall time, peak RSS and the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/lint
mkdir -p "$work"
bin=$PWD/bin/flatcar-capo
[ -x "$bin" ] || make build >/dev/null
big=$work/1000-documents.yaml
: > "$big"
for i in $(seq -w 0 124); do
  sed "s/demo/demo$i/g" testdata/lint/good.yaml >> "$big"
  printf -- '---\n' >> "$big"
done
docs=$("$bin" lint -o json "$big" | python3 -c 'import json,sys; print(json.load(sys.stdin)["documents"])')
runs=${RUNS:-10}
times=(); rss=0
for _ in $(seq "$runs"); do
  t=$( { /usr/bin/time -f '%e %M' "$bin" lint "$big" >/dev/null; } 2>&1 | tail -1)
  times+=("${t% *}"); r=${t#* }; (( r > rss )) && rss=$r
done
med=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
echo "flatcar-capo lint: $docs documents, $(du -k "$big" | cut -f1) KiB: median ${med}s over $runs runs, peak RSS ${rss} KiB"
echo "ratio to the 1 s target: $(python3 -c "print('%.2f' % ($med / 1.0))")"
