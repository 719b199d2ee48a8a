#!/usr/bin/env bash
# Image preload: kubeadm's seven images (test images sized like the real ones, ~250 MB) pulled
# from a local docker-registry (TLS from a test CA, htpasswd login) and written as the archive a
# build bakes, against `skopeo copy` of the same refs to docker archives, in the same run; then
# a warm pull (must transfer 0 bytes). Needs docker-registry and skopeo (install-deps.sh bench).
# Usage: scripts/bench/preload.sh
set -euo pipefail
export FLATCAR_CAPO_REAL_TESTS=1 # the real tier: its benchmark runs the real tools (internal/testing/testutil)
cd "$(dirname "$0")/../.."
exec go test -run '^$' -bench BenchmarkPreloadVsSkopeo -benchtime 1x -timeout 30m ./pkg/images/ | grep -E '^preload:|FAIL|ok'
