#!/usr/bin/env bash
# Installs the real parts the tests and the demo drive (QEMU, Packer, GRUB, btrfs/ext4 tools,
# Keystone + Glance, ...). Idempotent: packages already present are not asked for again.
# Usage: scripts/install-deps.sh [--list] [test|demo|bench|image|capo-proof]   (default: test)
#   --list prints the profile's Debian packages, one a line, and installs nothing (internal/testing/testutil's
#   TestInstallDepsInstallsEveryTool checks every tool the tests require against it).
set -euo pipefail
list=false
if [ "${1:-}" = --list ]; then list=true; shift; fi
profile=${1:-test}

common=(qemu-system-x86 qemu-utils ovmf grub-pc-bin grub-efi-amd64-bin grub-common busybox-static
  linux-image-amd64 btrfs-progs e2fsprogs dosfstools mtools gdisk fdisk xorriso lbzip2 bzip2 gnupg
  util-linux curl ca-certificates)
test=(packer dropbear-bin openssh-client keystone python3-keystone glance glance-api glance-common python3-openstackclient
  uwsgi-core uwsgi-plugin-python3 cpio mmdebstrap gcc libc6-dev squashfs-tools docker-registry runc mount
  gpg gpgconf python3-minimal barbican-api barbican-common python3-jsonschema iptables kmod libblkid-dev gettext-base)
  # gcc + libc6-dev: cgo for `go test -race`; squashfs-tools: sysext checks; docker-registry: the real
  # registry of the image-preload tests; kmod: modprobe reads the USB-storage modprobe.d file a build bakes; runc: the runtime of their containerd (no other package brings it);
  # barbican-api: the key manager Glance reads image-signing certificates from (signature tests);
  # python3-jsonschema: the SBOM against CycloneDX's schema; iptables: the node proof's kube-proxy image
  # carries it, as upstream's distroless-iptables does; libblkid-dev: the stand-in guest's Ignition (cgo);
  # gettext-base: envsubst, which the templates' preKubeadmCommands run (pkg/capo runs them).
  # The packages that provide a required tool are named even when a meta package pulls them in.
bench=(libguestfs-tools hyperfine time skopeo linux-perf) # skopeo: scripts/bench/preload.sh's baseline; linux-perf: profiles (perf record/stat) of the benches
# make test-image: podman runs the container image (rootful podman, a non-root user inside).
image=(podman crun uidmap fuse-overlayfs slirp4netns)
# make demo: packer + QEMU build, Keystone + Glance, the stand-in guest (mmdebstrap), sysexts, jq,
# docker-registry (the image registry kubeadm's images are preloaded from).
demo=(packer openssh-client keystone glance barbican-api python3-openstackclient uwsgi-plugin-python3 cpio mmdebstrap docker-registry
  squashfs-tools jq gcc libc6-dev libblkid-dev) # gcc, libc6-dev, libblkid-dev: the stand-in guest's Ignition (cgo), built on first use

# make capo-proof: OpenStack compute from Debian (Nova, Placement, Neutron, libvirt, RabbitMQ; ~234
# packages on top of test), installed by its own script; not part of make test.
case "$profile" in
  capo-proof) want=("${common[@]}" "${test[@]}")
    mapfile -t compute < <("$(dirname "$0")/install-openstack-compute.sh" --list)
    if $list; then printf '%s\n' "${want[@]}" "${compute[@]}"; exit 0; fi ;;
  demo)  want=("${common[@]}" "${demo[@]}") ;;
  test)  want=("${common[@]}" "${test[@]}") ;;
  bench) want=("${common[@]}" "${test[@]}" "${bench[@]}") ;;
  image) want=("${common[@]}" "${test[@]}" "${image[@]}") ;;
  *) echo "usage: $0 [test|demo|bench|image|capo-proof]" >&2; exit 2 ;;
esac
if $list; then printf '%s\n' "${want[@]}"; exit 0; fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
# The Go builds below need only Go, the network and CA certificates: on a fresh machine they start
# right after ca-certificates, so they compile while apt unpacks everything else.
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  if ! dpkg-query -W -f='${Status}' ca-certificates 2>/dev/null | grep -q "install ok installed"; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null
  fi
fi
# The test profile also starts the node proof's Kubernetes build (scripts/install-kubernetes.sh:
# ~27 min of CPU cold, seconds cached) in the background at nice 19, not waited for: it compiles
# while apt and the other tests leave a core idle; the node proof's test waits for its lock.
if [ "$profile" = test ]; then
  k8s_log=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo/kubernetes/build.log
  mkdir -p "$(dirname "$k8s_log")"
  echo "install-deps: building Kubernetes in the background if not cached (output: $k8s_log)" >&2
  setsid nohup nice -n 19 "$(dirname "$0")/install-kubernetes.sh" >>"$k8s_log" 2>&1 </dev/null &
  # The same for the CAPI and CAPO managers (scripts/install-capi.sh: ~460 CPU-s per CAPI
  # version and ~230 for CAPO cold) that pkg/capo's admission test runs on that kube-apiserver.
  capi_log=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo/capi/build.log
  mkdir -p "$(dirname "$capi_log")"
  echo "install-deps: building the CAPI/CAPO managers in the background if not cached (output: $capi_log)" >&2
  setsid nohup nice -n 19 "$(dirname "$0")/install-capi.sh" >>"$capi_log" 2>&1 </dev/null &
fi
# Packer >= 1.10 with the QEMU plugin (what users run; Debian has 1.6.6 only): built from the Go
# module proxy and cached when none is found (first run ~2-5 min, then ~1 s). The demo runs
# Debian's packer (DEMO_PACKER picks another), so a fresh machine's `make demo` skips it.
# containerd 2.1.5 (Flatcar's major version) + ctr + shim and crictl for the image-preload proof,
# built from the Go module proxy and cached (first run a few minutes, then ~0.1 s). Both beside
# the apt install and each other, so the module downloads of one overlap the compiling of the other.
builds=()
if [ "$profile" != demo ] && [ "$profile" != capo-proof ]; then
  "$(dirname "$0")/install-containerd.sh" >/dev/null & builds+=($!)
  "$(dirname "$0")/install-packer.sh" >/dev/null & builds+=($!)
fi
if ((${#missing[@]})); then
  # Service start-up during install is refused in containers; that is harmless here.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The stand-in guest's Ignition (scripts/install-ignition.sh: cgo, so after apt brought gcc and
# libblkid-dev), built like Kubernetes: in the background at nice 19, not waited for; the
# stand-in's tests wait for its lock, and find it cached (~0.3 s) once it is built.
if [ "$profile" = test ]; then
  ign_log=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo/ignition/build.log
  mkdir -p "$(dirname "$ign_log")"
  echo "install-deps: building the stand-in guest's Ignition in the background if not cached (output: $ign_log)" >&2
  setsid nohup nice -n 19 "$(dirname "$0")/install-ignition.sh" >>"$ign_log" 2>&1 </dev/null &
fi
for pid in "${builds[@]}"; do wait "$pid"; done
if [ "$profile" = test ]; then
  # The rest of the containerd matrix of the containerd proofs (registrytest.ContainerdMatrix;
  # ~150 CPU-s each cold), one at a time after 2.1.5 (built above, waited for): those proofs wait
  # for install-containerd.sh's lock, so no test waits for a containerd it does not run.
  ctr_log=${XDG_CACHE_HOME:-$HOME/.cache}/flatcar-capo/containerd/build.log
  mkdir -p "$(dirname "$ctr_log")"
  echo "install-deps: building containerd 2.2.9, 2.3.7, 2.4.2 in the background if not cached (output: $ctr_log)" >&2
  setsid nohup nice -n 19 bash -c 'for v in 2.2.9 2.3.7 2.4.2; do "$0" "$v" || exit; done' "$(dirname "$0")/install-containerd.sh" >>"$ctr_log" 2>&1 </dev/null &
fi
if [ "$profile" = capo-proof ]; then "$(dirname "$0")/install-openstack-compute.sh"; fi
# Go modules for the build and tests.
if [ -f go.mod ] && command -v go >/dev/null; then go mod download; fi
