#!/usr/bin/env bash
# build --method sysext on a Flatcar-sized image: 9 GiB sparse with Flatcar's partition table and
# sizes (ESP 1 GiB vfat, USR-A 2 GiB ext4 with ~800 MiB of libraries, OEM 1 GiB btrfs, ROOT the
# rest, ext4 made as Flatcar makes it, holding ~500 files to carry), and a Kubernetes sysext of
# >= 100 MiB made from the binaries a local mirror on 127.0.0.1 serves (kubelet is 120 MiB of
# incompressible bytes). Downloads are cached by a first run; the measured run rebuilds (--force)
# with them cached, so the download is excluded. Prints wall time, peak RSS and each step's time.
# Goal: < 30 s and < 300 MB on the 2-core machine. The packer-vs-sysext comparison on the
# stand-in guest is scripts/bench/build.sh. Needs sgdisk, mkfs.vfat, mtools, mkfs.ext4,
# mkfs.btrfs, python3, /usr/bin/time. Usage: scripts/bench/sysext-build.sh
# Issue 20's form (scripts/bench/sysext-build-published.sh sets these): BASE=qcow2 starts from the
# image as Flatcar publishes it (qemu-img convert -c -o compat=0.10); ANCHOR=1 (root) times, in the
# same run and interleaved (best of ROUNDS), what a user does instead: qemu-img convert to raw,
# losetup (-P, or ROOT's offset), mount ROOT, copy the sysext and make the link, umount, qemu-img convert back;
# COMPRESS=1 also builds with --compress; UPLOAD=1 uploads both artifacts to a local Glance.
# SYSEXT_FILE=1 (issue 30 item 9's form) measures builds given the 120 MiB sysext as a prebuilt
# --sysext FILE (the first run's) instead of making it from the mirror's downloads.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
work=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/sysext
mkdir -p "$work"
bin=$work/flatcar-capo
go build -trimpath -o "$bin" ./cmd/flatcar-capo || { echo "cannot build flatcar-capo" >&2; exit 1; }
img=$work/flatcar-9g.raw
ver=4459.2.0
k8s=v1.33.4 crictl=v1.33.0 cni=v1.7.1
mib=1048576

# fs NAME SIZE_MIB MKFS...: make a filesystem image file of that size.
fs() { local f=$work/$1.fs; rm -f "$f"; truncate -s "$2M" "$f"; shift 2; "$@"; }
put() { dd if="$1" of="$2" bs=1M seek="$3" conv=sparse,notrunc status=none; } # put FILE IMG OFFSET_MIB

build_image() {
  local tmp=$img.partial stage=$work/stage
  rm -rf "$tmp" "$stage"
  truncate -s 9G "$tmp"
  sgdisk \
    -n 1:4096:+1G -t 1:C12A7328-F81F-11D2-BA4B-00A0C93EC93B -c 1:EFI-SYSTEM \
    -n 2:0:+2M -t 2:21686148-6449-6E6F-744E-656564454649 -c 2:BIOS-BOOT \
    -n 3:0:+2G -t 3:5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6 -c 3:USR-A \
    -n 4:0:+2G -t 4:5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6 -c 4:USR-B \
    -n 6:0:+1G -t 6:0FC63DAF-8483-4772-8E79-3D69D8477DE4 -c 6:OEM \
    -n 7:0:+64M -t 7:C95DC21A-DF0E-4340-8D7B-26CBFA9A03E0 -c 7:OEM-CONFIG \
    -n 9:0:0 -t 9:3884DD41-8582-4404-B9A8-E9B84F2DF50E -c 9:ROOT "$tmp" >/dev/null
  start() { sgdisk -i "$1" "$tmp" | awk '/First sector/ {printf "%d", $3 * 512 / 1048576}'; }
  size() { sgdisk -i "$1" "$tmp" | awk '/Partition size/ {printf "%d", $3 * 512 / 1048576}'; }
  mkdir -p "$stage/esp/flatcar" "$stage/usr" "$stage/oem/sysext" "$stage/root/etc" "$stage/root/home/core"
  : >"$stage/esp/flatcar/first_boot"
  fs esp "$(size 1)" mkfs.vfat -F 32 -n EFI-SYSTEM "$work/esp.fs" >/dev/null
  MTOOLS_SKIP_CHECK=1 mcopy -s -i "$work/esp.fs" "$stage/esp/flatcar" ::/
  # USR-A: libraries and programs, ~800 MiB (Flatcar's is btrfs; the build does not read it).
  cp -a /usr/lib/x86_64-linux-gnu "$stage/usr/lib" 2>/dev/null || true
  cp -a /usr/bin "$stage/usr/bin"
  fs usr "$(size 3)" mkfs.ext4 -q -F -L USR-A -d "$stage/usr" "$work/usr.fs"
  printf 'set oem_id="qemu"\nset linux_append="flatcar.autologin"\n' >"$stage/oem/grub.cfg"
  printf 'ID=qemu\nVERSION_ID=%s\nNAME="QEMU"\n' "$ver" >"$stage/oem/oem-release"
  printf '%s\n' "$ver" >"$stage/oem/sysext/active-oem-qemu"
  head -c 4096 /dev/zero >"$stage/oem/sysext/oem-qemu-$ver.raw"
  fs oem "$(size 6)" mkfs.btrfs -q --mixed -m single -d single -L OEM -r "$stage/oem" "$work/oem.fs"
  # ROOT: what the bake carries, ~500 files (a fresh Flatcar ROOT has fewer).
  find /usr/share/doc -maxdepth 2 -type f -size -200k >"$work/doc.list" || true
  head -500 "$work/doc.list" | while read -r f; do
    mkdir -p "$stage/root/usr-share-doc/$(dirname "${f#/usr/share/doc/}")"
    cp "$f" "$stage/root/usr-share-doc/${f#/usr/share/doc/}"
  done
  echo core >"$stage/root/etc/hostname"
  fs root "$(size 9)" mkfs.ext4 -q -F -t ext4 -b 4096 -i 4096 -I 256 -L ROOT -d "$stage/root" "$work/root.fs"
  put "$work/esp.fs" "$tmp" "$(start 1)"
  put "$work/usr.fs" "$tmp" "$(start 3)"
  put "$work/oem.fs" "$tmp" "$(start 6)"
  put "$work/root.fs" "$tmp" "$(start 9)"
  rm -rf "$stage" "$work"/*.fs
  mv "$tmp" "$img"
}
[ -f "$img" ] || build_image
echo "image: $img, $(du -k --apparent-size "$img" | cut -f1) KiB virtual, $(du -k "$img" | cut -f1) KiB allocated"

# The mirror: dl.k8s.io and github.com paths, each file with its .sha256.
mirror=$work/mirror
if [ ! -f "$mirror/ok" ]; then
  rm -rf "$mirror"
  k=$mirror/release/$k8s/bin/linux/amd64
  mkdir -p "$k" "$mirror/kubernetes-sigs/cri-tools/releases/download/$crictl" \
    "$mirror/containernetworking/plugins/releases/download/$cni" "$work/t"
  { printf '#!/bin/sh\necho kubelet\nexit 0\n'; head -c $((120 * mib)) /dev/urandom; } >"$k/kubelet"
  for b in kubeadm kubectl; do printf '#!/bin/sh\necho %s\n' "$b" >"$k/$b"; done
  printf '#!/bin/sh\necho crictl\n' >"$work/t/crictl" && chmod +x "$work/t/crictl"
  tar -C "$work/t" -czf "$mirror/kubernetes-sigs/cri-tools/releases/download/$crictl/crictl-$crictl-linux-amd64.tar.gz" crictl
  for p in bridge host-local loopback portmap; do printf '#!/bin/sh\necho %s\n' "$p" >"$work/t/$p"; done
  tar -C "$work/t" -czf "$mirror/containernetworking/plugins/releases/download/$cni/cni-plugins-linux-amd64-$cni.tgz" ./bridge ./host-local ./loopback ./portmap
  find "$mirror" -type f | while read -r f; do sha256sum "$f" | cut -d' ' -f1 >"$f.sha256"; done
  touch "$mirror/ok"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$mirror" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/ok" >/dev/null 2>&1 && break; sleep 0.1; done

base=$img
if [ "${BASE:-raw}" = qcow2 ]; then
  base=$work/flatcar-9g-c010.qcow2
  [ -f "$base" ] || qemu-img convert -c -f raw -O qcow2 -o compat=0.10 "$img" "$base"
  echo "base: $base, compressed qcow2 compat 0.10, $(( $(stat -c %s "$base") / mib )) MiB"
fi
out=$work/out
args=(build --method sysext --base-image "$base" --version "$ver" --cache-dir "$work/cache" --output-dir "$out"
  --kubernetes-mirror "http://127.0.0.1:$port/release" --github-mirror "http://127.0.0.1:$port" --force --no-preload-images
  --kubernetes-version "$k8s" --crictl-version "$crictl" --cni-version "$cni")
"$bin" "${args[@]}" >/dev/null 2>"$work/first.log" || { cat "$work/first.log"; exit 1; } # fills the download cache
if [ "${SYSEXT_FILE:-}" = 1 ]; then
  prebuilt=$work/prebuilt/$(basename "$(ls "$out"/kubernetes-*.raw)")
  mkdir -p "$work/prebuilt" && cp "$out"/kubernetes-*.raw "$prebuilt"
  args=(build --method sysext --base-image "$base" --version "$ver" --cache-dir "$work/cache" --output-dir "$out"
    --sysext "$prebuilt" --force --no-preload-images)
  echo "sysext: $prebuilt given as --sysext FILE"
fi
# anchor: the manual bake as root (what sysext-bakery's bake script does with loop mounts)
anchor() {
  local a=$work/anchor mnt=$work/anchor-mnt dev sx
  sx=${prebuilt:-$(ls "$out"/kubernetes-*.raw)}
  rm -f "$a.raw" "$a.qcow2"; mkdir -p "$mnt"
  qemu-img convert -f qcow2 -O raw "$base" "$a.raw"
  # losetup -P makes no partition devices in these containers (no udev): ROOT by offset instead
  local first size
  first=$(sgdisk -i 9 "$a.raw" | awk '/First sector/ {print $3}')
  size=$(sgdisk -i 9 "$a.raw" | awk '/Partition size/ {print $3}')
  dev=$(losetup --show -f -o $((first * 512)) --sizelimit $((size * 512)) "$a.raw")
  mount "$dev" "$mnt"
  mkdir -p "$mnt/opt/extensions/kubernetes" "$mnt/etc/extensions"
  cp "$sx" "$mnt/opt/extensions/kubernetes/"
  ln -sf "/opt/extensions/kubernetes/$(basename "$sx")" "$mnt/etc/extensions/kubernetes.raw"
  umount "$mnt"; losetup -d "$dev"
  qemu-img convert -f raw -O qcow2 "$a.raw" "$a.qcow2"
}
rounds=${ROUNDS:-1}
: >"$work/ours.t"; : >"$work/anchor.t"
for _ in $(seq "$rounds"); do
  sync
  /usr/bin/time -o "$work/time1" -f '%e %M %U %S' "$bin" "${args[@]}" >/dev/null 2>"$work/run1.log" ||
    { cat "$work/run1.log"; exit 1; }
  if read -r w _ <"$work/time1" && { [ ! -s "$work/ours.t" ] || awk -v w="$w" '{exit !(w < $1)}' "$work/ours.t"; }; then
    cp "$work/time1" "$work/time"; cp "$work/run1.log" "$work/run.log"; cp "$work/time1" "$work/ours.t"
  fi
  if [ "${ANCHOR:-}" = 1 ]; then
    sync
    /usr/bin/time -o "$work/atime" -f '%e %M' bash -c "$(declare -f anchor); work=$work out=$out base=$base prebuilt=${prebuilt:-} anchor" >/dev/null 2>&1 ||
      { echo "anchor failed" >&2; exit 1; }
    cat "$work/atime" >>"$work/anchor.t"
    rm -f "$work/anchor.raw" "$work/anchor.qcow2" # 2.6 GiB a round: a full disk fails the next build
  fi
done
grep -E '^\[[0-9]+/[0-9]+\]' "$work/run.log" | sed 's/^/  /'
read -r wall rss user sys <"$work/time"
if [ "${ANCHOR:-}" = 1 ]; then
  read -r awall arss < <(sort -n "$work/anchor.t" | head -1)
  printf 'anchor (qemu-img convert, losetup ROOT, mount, cp + ln, umount, qemu-img convert back, as root): %.1f s, peak RSS %d MiB\n' "$awall" $((arss / 1024))
  awk -v a="$awall" -v o="$wall" -v r="$rounds" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN{printf "ratio: %.2fx the anchor (best of %d, goal >= 1.5x), load %s\n", a/o, r, l}'
fi
raw=${prebuilt:-$(ls "$out"/kubernetes-*.raw)}
printf 'sysext %s: %d MiB\n' "$(basename "$raw")" $(( $(stat -c %s "$raw") / mib ))
printf 'build --method sysext (downloads cached): %.1f s wall, %.1f s CPU, peak RSS %d MiB (goal < 30 s, < 300 MB)\n' \
  "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" $((rss / 1024))
if [ "${COMPRESS:-}" = 1 ]; then
  plain=$(ls "$out"/*.qcow2)
  cp "$plain" "$work/plain.qcow2"
  /usr/bin/time -o "$work/ctime" -f '%e %M' "$bin" "${args[@]}" --compress >/dev/null 2>"$work/crun.log" || { cat "$work/crun.log"; exit 1; }
  read -r cwall crss <"$work/ctime"
  printf 'build --compress: %.1f s, peak RSS %d MiB; artifact %d MiB compressed against %d MiB plain\n' "$cwall" $((crss / 1024)) \
    $(( $(stat -c %s "$plain") / mib )) $(( $(stat -c %s "$work/plain.qcow2") / mib ))
  if [ "${UPLOAD:-}" = 1 ]; then
    os_dir=$(mktemp -d /var/tmp/flatcar-capo-bench-openstack.XXXXXX)
    trap 'kill $server 2>/dev/null || true; scripts/openstack.sh down "$os_dir"; rm -rf "$os_dir"' EXIT
    scripts/openstack.sh up "$os_dir" --owner $$ >/dev/null
    export OS_CLIENT_CONFIG_FILE=$os_dir/clouds.yaml
    for f in "$work/plain.qcow2" "$plain"; do
      /usr/bin/time -o "$work/utime" -f '%e' "$bin" upload "$f" --name "bench-$(basename "$f" .qcow2)-$RANDOM" --cloud local >/dev/null 2>"$work/up.log" ||
        { cat "$work/up.log"; exit 1; }
      printf 'upload to the local Glance: %s (%d MiB) %.1f s\n' "$(basename "$f")" $(( $(stat -c %s "$f") / mib )) "$(cat "$work/utime")"
    done
  fi
fi
