#!/usr/bin/env bash
# The main job on a built-in default: a Flatcar-layout qemu image (made locally, no download)
# is inspected, retargeted to OpenStack without root, inspected again, converted to qcow2 for
# Glance, and the CAPO manifests for it are rendered.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
bin=bin/flatcar-capo
out=${DEMO_DIR:-demo}
mkdir -p "$out"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Building a Flatcar-layout qemu image (btrfs OEM, grub.cfg: oem_id=qemu, flatcar.autologin; /flatcar/first_boot on the ESP)"
go run ./scripts/mkdisk -variant btrfs -first-boot -o "$out/flatcar-qemu.raw"

step "flatcar-capo inspect $out/flatcar-qemu.raw --for openstack   (expected: NOT READY, exit 1)"
$bin inspect "$out/flatcar-qemu.raw" --for openstack || echo "(exit code $?: as expected, a qemu image is not ready for OpenStack)"

step "flatcar-capo oem set $out/flatcar-qemu.raw --id openstack --output-file $out/flatcar-openstack.raw"
time $bin oem set "$out/flatcar-qemu.raw" --id openstack --output-file "$out/flatcar-openstack.raw"

step "flatcar-capo inspect $out/flatcar-openstack.raw --for openstack"
$bin inspect "$out/flatcar-openstack.raw" --for openstack

if command -v grub-fstest >/dev/null; then
  step "What GRUB itself reads from the OEM partition (grub-fstest)"
  grub-fstest "$out/flatcar-openstack.raw" cat '(loop0,gpt6)/grub.cfg'
fi

if $bin convert --help >/dev/null 2>&1; then
  step "flatcar-capo convert $out/flatcar-openstack.raw $out/flatcar-openstack.qcow2 --compress"
  $bin convert "$out/flatcar-openstack.raw" "$out/flatcar-openstack.qcow2" --compress
  $bin oem show "$out/flatcar-openstack.qcow2"
fi

if $bin manifests --help >/dev/null 2>&1; then
  step "flatcar-capo manifests --image-name flatcar-openstack --kubernetes-version v1.33.1 (first lines)"
  $bin manifests --image-name flatcar-openstack --kubernetes-version v1.33.1 --cluster-name demo | head -40
fi
step "Done: artifacts are in $out/"
ls -lsh "$out"
