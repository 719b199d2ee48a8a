#!/usr/bin/env bash
# build --method sysext of the Flatcar-sized image of scripts/bench/sysext-build.sh (9 GiB sparse;
# made by running that script first when it is missing) with kubeadm's seven images preloaded,
# sized like the real ones (~250 MB), from a local docker-registry (TLS + login); the download
# and image caches are filled by a first run, the measured run rebuilds with them warm (0 bytes
# transferred). Goal: < 30 s and < 300 MB. Needs docker-registry. Usage: scripts/bench/preload-build.sh
set -euo pipefail
export FLATCAR_CAPO_REAL_TESTS=1 # the real tier: its benchmark runs the real tools (internal/testing/testutil)
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
img=${BENCH_DIR:-/var/tmp/flatcar-capo-bench}/sysext/flatcar-9g.raw
[ -f "$img" ] || scripts/bench/sysext-build.sh >/dev/null
FLATCAR_CAPO_BENCH_IMAGE=$img go test -run '^$' -bench BenchmarkSysextBuildPreload -benchtime 1x -timeout 30m ./pkg/imagebuild/ |
  grep -E '^(sysext build|same build|  \[)'
