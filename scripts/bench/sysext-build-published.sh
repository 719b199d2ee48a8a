#!/usr/bin/env bash
# Issue 20 goal 1 (and 4): build --method sysext from the image as Flatcar publishes it (compressed
# qcow2, compat 0.10), 120 MiB sysext, downloads cached; against the manual loop-mount bake as root,
# interleaved in one run (best of ROUNDS, default 3); then --compress and, with UPLOAD=1, the upload
# time of each artifact to a local Glance. Goal: < 8 s, < 300 MB, >= 1.5x the anchor.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=qcow2 ANCHOR=1 COMPRESS=1 ROUNDS=${ROUNDS:-3} exec scripts/bench/sysext-build.sh
