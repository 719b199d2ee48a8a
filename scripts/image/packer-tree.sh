#!/usr/bin/env bash
# Lays out, under DIR, what the Packer method adds to the container image (make image-packer):
# packer >= 1.10 and its QEMU plugin (static Go binaries, built by scripts/install-packer.sh), and
# Debian's qemu-system-x86_64 and qemu-img with every shared library they load and the firmware
# they read (SeaBIOS, OVMF, option ROMs). amd64 only: the libraries are this machine's.
# Usage: scripts/image/packer-tree.sh DIR
set -euo pipefail
out=${1:?usage: $0 DIR}
rm -rf "$out"; mkdir -p "$out"
packer=$("$(dirname "$0")/../install-packer.sh")    # prints the cached packer binary
plugins="$(dirname "$packer")/plugins"
install -D -m 0755 "$packer" "$out/usr/local/bin/packer"
mkdir -p "$out/usr/local/lib/packer"
cp -a "$plugins" "$out/usr/local/lib/packer/plugins"
for bin in /usr/bin/qemu-system-x86_64 /usr/bin/qemu-img; do
  install -D -m 0755 "$bin" "$out$bin"
  # every library the loader resolves, at the same path, plus the loader itself
  ldd "$bin" | awk '/=> \//{print $3} /^\s*\/lib/{print $1}' | while read -r lib; do
    [ -e "$out$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$out$lib"
  done
done
for d in /usr/share/qemu /usr/share/seabios /usr/share/OVMF /usr/lib/ipxe/qemu; do
  [ -d "$d" ] && mkdir -p "$out$d" && cp -rL "$d/." "$out$d/"
done
# the loader path programs ask for
[ -e "$out/lib64/ld-linux-x86-64.so.2" ] || install -D -m 0755 "$(readlink -f /lib64/ld-linux-x86-64.so.2)" "$out/lib64/ld-linux-x86-64.so.2"
echo "$out"
