#!/usr/bin/env bash
# flatcar-capo build on the stand-in guest (a signed local release + a local Kubernetes mirror,
# real packer + QEMU TCG): per-step wall times of each method (packer; sysext when available)
# and flatcar-capo's own share, i.e. every step but the VM step, downloads excluded.
# Target: under 10% of the Packer build. Usage: scripts/bench/build.sh
set -euo pipefail
export FLATCAR_CAPO_REAL_TESTS=1 # the real tier: its benchmark runs the real tools (internal/testing/testutil)
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
go test ./pkg/imagebuild/ -run '^$' -bench 'BenchmarkBuildStandin|BenchmarkNonVMStepsFlatcarSized' -benchtime 1x -timeout 60m |
  grep -v -e '^goos:' -e '^goarch:' -e '^pkg:' -e '^cpu:' -e '^PASS' -e '^ok ' -e 'ns/op'
