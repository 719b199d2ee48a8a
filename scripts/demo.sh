#!/usr/bin/env bash
# `make demo`: the main job end to end with no internet and no cloud account, on stand-ins:
#   - a release server on 127.0.0.1 with a Flatcar-layout release of the stand-in guest (a small
#     Debian systemd guest on Flatcar's disk layout), signed by a demo key passed with --keyring,
#     and a Kubernetes mirror with stand-in binaries and their .sha256 (scripts/demo/standins);
#   - a real registry (Debian's docker-registry, TLS from a demo CA, a login) holding small images
#     under the names the stand-in kubeadm lists: the air-gap story, both builds preload from it
#     through --registry-mirror (the same standins program);
#   - a real Keystone + Glance on 127.0.0.1 (scripts/openstack.sh), cloud "demo";
#   - flatcar-capo build (Packer + QEMU), then build --method sysext of the same release,
#     inspect, the Glance image IDs and the CAPO manifests.
# Everything it starts is stopped on exit. DEMO_DIR (default ./demo) keeps the artifacts and the
# servers' ports, so a rerun reuses the finished images. DEMO_PACKER picks the packer binary.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
bin=$PWD/bin/flatcar-capo
out=$(mkdir -p "${DEMO_DIR:-demo}" && cd "${DEMO_DIR:-demo}" && pwd)
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
say() { printf '    %s\n' "$*"; }
demo_start=$SECONDS

standins_pid='' osdir=''
stop_all() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$standins_pid" ] && kill "$standins_pid" 2>/dev/null && wait "$standins_pid" 2>/dev/null || true
  if [ -n "$osdir" ]; then scripts/openstack.sh down "$osdir" >/dev/null 2>&1 || true; rm -rf "$osdir"; fi
  # build stops its own QEMU; this is a last resort for one started under $out.
  pkill -f "qemu-system.*$out/" 2>/dev/null || true
  ((rc == 0)) || echo "demo: FAILED (exit $rc); everything it started is stopped. Logs: $out/*.log" >&2
  exit "$rc"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

cat <<EOF

  flatcar-capo demo: THIS IS A DEMO ON STAND-INS, not on Flatcar and not on a real cloud.
  The "Flatcar release" is a small Debian systemd guest laid out like Flatcar's disk, served
  from 127.0.0.1 and signed by a demo key; kubeadm/kubelet/kubectl/crictl/CNI are stand-in
  scripts from a local mirror; kubeadm's images are small busybox images in a real registry
  (docker-registry) on 127.0.0.1, preloaded as an air-gapped node needs them; Keystone + Glance
  are real, on 127.0.0.1. Packer and QEMU are real (TCG: no KVM needed). Nothing here touches the
  internet. Artifacts: $out

EOF

step "Keystone + Glance on 127.0.0.1 (scripts/openstack.sh), started in the background"
osdir=$(mktemp -d /tmp/flatcar-capo-demo-openstack.XXXXXX)
os_start=$SECONDS
scripts/openstack.sh up "$osdir" --owner $$ >"$out/openstack.log" 2>&1 &
os_pid=$!

step "Stand-in release server, Kubernetes mirror and image registry on 127.0.0.1 (the first run builds the stand-in guest: root + mmdebstrap, a few minutes; then cached)"
go build -o bin/demo-standins ./scripts/demo/standins
rm -f "$out/standins/standins.env"
bin/demo-standins -dir "$out/standins" -owner $$ > >(tee "$out/standins.log" | sed -u 's/^/    /') 2>&1 &
standins_pid=$!
deadline=$((SECONDS + 1200))
until [ -f "$out/standins/standins.env" ]; do
  kill -0 "$standins_pid" 2>/dev/null || { echo "demo: the stand-in servers did not start; see $out/standins.log" >&2; exit 1; }
  ((SECONDS < deadline)) || { echo "demo: the stand-in servers did not start within 20 min" >&2; exit 1; }
  sleep 1
done
# shellcheck disable=SC1091
. "$out/standins/standins.env"
mirrors=(--release-server "$RELEASE_SERVER" --keyring "$KEYRING"
  --kubernetes-mirror "$KUBERNETES_MIRROR" --github-mirror "$GITHUB_MIRROR"
  --registry-mirror "registry.k8s.io=https://$REGISTRY" --registry-ca "$REGISTRY_CA")
export DOCKER_CONFIG # the registry's login, as `docker login` writes it

step "Keystone + Glance: cloud 'demo' in a clouds.yaml"
wait "$os_pid" || { cat "$out/openstack.log" >&2; exit 1; }
{ cat "$osdir/clouds.yaml"; printf '  demo:\n    <<: *local\n'; } >"$out/clouds.yaml"
chmod 600 "$out/clouds.yaml"
export OS_CLIENT_CONFIG_FILE=$out/clouds.yaml
say "up after $((SECONDS - os_start)) s; OS_CLIENT_CONFIG_FILE=$OS_CLIENT_CONFIG_FILE"

packer=${DEMO_PACKER:-$(command -v packer || true)}
[ -n "$packer" ] || { echo "demo: no packer on PATH: run scripts/install-deps.sh demo" >&2; exit 1; }

build() { # NAME ARGS...: one build, its progress indented, its record in $out/NAME.json
  local name=$1; shift
  local cmd=("$bin" build --oem openstack --channel stable --cloud demo "${mirrors[@]}" --output-dir "$out/$name" "$@")
  step "flatcar-capo ${cmd[*]:1}"
  local t=$SECONDS
  # Progress (stderr) is shown and kept in NAME.log; the record (-o json) goes to NAME.json.
  "${cmd[@]}" -o json 2> >(tee "$out/$name.log" | sed -u 's/^/    /') >"$out/$name.json"
  echo $((SECONDS - t)) >"$out/$name.seconds"
  # The time of the build that made the artifact, kept for reruns that reuse it.
  [ "$(field .reused "$name")" = true ] || cp "$out/$name.seconds" "$out/$name.built-seconds"
}
field() { jq -r "$1" "$out/$2.json"; }

build packer --packer "$packer"
build sysext --method sysext

step "Both builds, side by side"
printf '    %-8s %-10s %-9s %-8s %-46s %s\n' method built-in this-run reused "Glance image (cloud demo)" artifact
for m in packer sysext; do
  built=$(cat "$out/$m.built-seconds" 2>/dev/null || echo "?")
  printf '    %-8s %-10s %-9s %-8s %-46s %s\n' "$m" "$built s" "$(cat "$out/$m.seconds") s" "$(field .reused $m)" \
    "$(field '.glance[0].id' $m) $(field '.glance[0].action' $m)" "$(field '.artifacts[0].file' $m)"
done
for m in packer sysext; do
  [ "$(field .reused $m)" = true ] && say "$m: reused (its record matches these inputs and its sha512 verifies; --force rebuilds)"
done

for m in packer sysext; do
  img=$(field '.artifacts[0].file' $m)
  [[ $img = /* ]] || img=$out/$m/$img
  step "flatcar-capo inspect $img --for openstack"
  "$bin" inspect "$img" --for openstack | sed -u 's/^/    /'
  "$bin" inspect "$img" --for openstack -o json >"$out/$m.inspect.json"
  say "verdict: $(jq -r .verdict "$out/$m.inspect.json") (exit 0)"
  say "preloaded: $(jq -r '.containerd.images | length' "$out/$m.inspect.json") images, pulled from the demo registry through --registry-mirror;" \
    "registry hosts: $(jq -r '[.containerd.registries[] | "\(.registry) -> \(.mirrors | join(","))"] | join("; ")' "$out/$m.inspect.json")"
  n=$(jq '.containerd.images | length' "$out/$m.inspect.json")
  ((n > 0)) || { echo "demo: $m: inspect lists no preloaded images" >&2; exit 1; }
done

step "What Glance holds (openstack --os-cloud demo image list)"
openstack --os-cloud demo image list -f value -c ID -c Name -c Status | sed 's/^/    /'

step "CAPO manifests for the uploaded images"
for m in packer sysext; do
  flavor=$(field .flavor $m)
  file=$out/cluster-$m.yaml
  "$bin" manifests --flavor $flavor --image-name "$(field .imageName $m)" \
    --kubernetes-version "$KUBERNETES_VERSION" --cluster-name demo-$m --output-file "$file" 2>&1 | sed -u 's/^/    /'
  say "$m: $file  (flavor $flavor; record says: $(field .manifestsCommand $m))"
done

step "Done in $((SECONDS - demo_start)) s. Glance image IDs:"
for m in packer sysext; do say "$m: $(field '.glance[0].id' $m)  $(field .imageName $m)"; done
say "manifests: $out/cluster-packer.yaml $out/cluster-sysext.yaml"

cat <<'EOF'

==> On a real cloud (internet, a clouds.yaml with your cloud "mycloud"; packer + qemu for the
    Packer method; KVM makes it faster but is not needed):

    export OS_CLIENT_CONFIG_FILE=~/.config/openstack/clouds.yaml
    flatcar-capo build --oem openstack --channel stable --cloud mycloud
    flatcar-capo build --oem openstack --channel stable --cloud mycloud --method sysext   # no VM
    flatcar-capo manifests --flavor baked --image-name flatcar-stable-<version>-kube-v1.36.1 \
        --kubernetes-version v1.36.1 --cluster-name mycluster --output-file cluster-template.yaml
    export EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true
    clusterctl generate cluster mycluster --from cluster-template.yaml > mycluster.yaml
    kubectl apply -f mycluster.yaml

    build prints the image name and the exact manifests command for the image it made.
    Air-gapped: add --release-server, --kubernetes-mirror, --github-mirror (or --sysext FILE),
    and --registry-mirror registry.k8s.io=https://YOUR-REGISTRY (--registry-ca) for the images.
EOF
