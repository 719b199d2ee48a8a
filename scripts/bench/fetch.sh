#!/usr/bin/env bash
# End-to-end fetch from a release server on 127.0.0.1, against what users chain by hand:
#   flatcar-capo fetch (OpenPGP + SHA512 verify, bzip2 decode, cache write) vs
#   curl | bzip2 -dc > file  and  curl | lbzip2 -dc > file  (no verification at all),
# plus the .img path (verify + copy) vs curl -o, and a cache hit.
# The release is shaped like Flatcar's: an lbzip2 -9 compressed qcow2 of real binaries and text,
# with DIGESTS clear-signed by a throwaway gpg key. Generated once under $FETCH_BENCH_DIR.
# Usage: scripts/bench/fetch.sh [runs]   (best wall time of `runs`, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
work=${FETCH_BENCH_DIR:-/var/tmp/flatcar-capo-bench/fetch}
version=9999.0.0
rel=$work/tree/stable/amd64-usr/$version
img=flatcar_production_qemu_image.img
mkdir -p "$rel" "$work/tree/stable/amd64-usr/current"

make_release() {
  local shared=/var/tmp/flatcar-capo-bench/release-like.img.bz2 raw=$work/disk.raw
  if [ -s "$shared" ]; then # the bzip2 benchmark's input, if it was generated
    lbzip2 -dc < "$shared" > "$rel/$img"
  else
    truncate -s 2G "$raw"
    tar cf - /usr/lib/x86_64-linux-gnu /usr/bin /usr/share/doc 2>/dev/null | head -c 700M |
      dd of="$raw" bs=1M seek=1 conv=notrunc iflag=fullblock status=none
    qemu-img convert -c -O qcow2 "$raw" "$rel/$img"
    rm -f "$raw"
  fi
  lbzip2 -9 -n2 < "$rel/$img" > "$rel/$img.bz2"
  export GNUPGHOME=$work/gnupg
  rm -rf "$GNUPGHOME" && mkdir -m 700 "$GNUPGHOME"
  gpg --batch -q --passphrase '' --quick-gen-key "Bench Buildbot <bench@example.invalid>" ed25519 sign never
  gpg --batch -q --export > "$work/keyring.gpg"
  for f in "$img" "$img.bz2"; do
    (cd "$rel" && { echo "# MD5 HASH"; md5sum "$f"; echo "# SHA1 HASH"; sha1sum "$f"; echo "# SHA512 HASH"; sha512sum "$f"; }) > "$rel/$f.DIGESTS"
    gpg --batch -q --yes --clearsign -o "$rel/$f.DIGESTS.asc" "$rel/$f.DIGESTS"
  done
  printf 'FLATCAR_VERSION=%s\nFLATCAR_VERSION_ID=%s\n' "$version" "$version" | tee "$rel/version.txt" > "$work/tree/stable/amd64-usr/current/version.txt"
}
[ -s "$rel/$img.bz2.DIGESTS.asc" ] && [ -s "$work/keyring.gpg" ] || { echo "generating the release tree in $work (once)..." >&2; make_release; }

make build >/dev/null
bin=$PWD/bin/flatcar-capo

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/tree" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/stable/amd64-usr/current/version.txt" >/dev/null && break; sleep 0.1; done
base=http://127.0.0.1:$port/stable/amd64-usr/$version
out=$work/out.img
fetch() { "$bin" fetch --quiet --release-server "http://127.0.0.1:$port/{channel}" --keyring "$work/keyring.gpg" --output-file "$out" "$@"; }

# Correctness (untimed): every path gives the published image.
want=$(sha256sum < "$rel/$img" | cut -d' ' -f1)
for mode in bz2 none; do
  rm -rf "$work/cache"; fetch --cache-dir "$work/cache" --compression $mode >/dev/null
  [ "$(sha256sum < "$out" | cut -d' ' -f1)" = "$want" ] || { echo "fetch --compression $mode: wrong output" >&2; exit 1; }
done

# best_of CMD...: best wall seconds and its peak RSS (KiB) over $runs runs.
best_of() {
  local best="" rss="" t m
  for _ in $(seq "$runs"); do
    rm -rf "$work/cache" "$out"
    /usr/bin/time -f '%e %M' -o "$work/time.txt" bash -c "$1" >/dev/null 2>&1 || { echo "failed: $1" >&2; exit 1; }
    read -r t m < "$work/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; rss=$m; fi
  done
  echo "$best $rss"
}
q() { printf '%q ' "$@"; }
fetch_cmd="$(q "$bin") fetch --quiet --release-server $(q "http://127.0.0.1:$port/{channel}") --keyring $(q "$work/keyring.gpg") --output-file $(q "$out") --cache-dir $(q "$work/cache")"

in_mb=$(( $(stat -c %s "$rel/$img.bz2") / 1048576 )); out_mb=$(( $(stat -c %s "$rel/$img") / 1048576 ))
echo "fetch benchmark: $img.bz2 ${in_mb} MiB -> ${out_mb} MiB, $(nproc) cores, best of $runs"
read -r ours ours_rss < <(best_of "$fetch_cmd --compression bz2")
read -r bz bz_rss < <(best_of "curl -sf $base/$img.bz2 | bzip2 -dc > $(q "$out")")
read -r lbz lbz_rss < <(best_of "curl -sf $base/$img.bz2 | lbzip2 -dc > $(q "$out")")
read -r ours_img ours_img_rss < <(best_of "$fetch_cmd --compression none")
read -r curl_img curl_img_rss < <(best_of "curl -sf -o $(q "$out") $base/$img")
rm -rf "$work/cache"; fetch --cache-dir "$work/cache" --compression bz2 >/dev/null
/usr/bin/time -f '%e %M' -o "$work/time.txt" bash -c "$fetch_cmd --compression bz2" >/dev/null 2>&1
read -r hit hit_rss < "$work/time.txt"

row() { printf '%-52s %7ss %8s MiB RSS %s\n' "$1" "$2" "$(( $3 / 1024 ))" "$4"; }
ratio() { awk "BEGIN{printf \"(%.2fx %s)\", $1/$2, \"$3\"}"; }
row "flatcar-capo fetch .bz2 (verify+decode+cache)" "$ours" "$ours_rss" ""
row "curl | bzip2 -dc (no verification)" "$bz" "$bz_rss" "$(ratio "$bz" "$ours" "ours is faster by")"
row "curl | lbzip2 -dc (no verification)" "$lbz" "$lbz_rss" "$(ratio "$lbz" "$ours" "ours is faster by")"
row "flatcar-capo fetch .img (verify+copy+cache)" "$ours_img" "$ours_img_rss" ""
row "curl -o (no verification)" "$curl_img" "$curl_img_rss" "$(ratio "$curl_img" "$ours_img" "ours is faster by")"
row "flatcar-capo fetch .bz2, cache hit (re-verify+decode)" "$hit" "$hit_rss" ""
rm -f "$out"
