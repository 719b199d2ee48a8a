#!/usr/bin/env bash
# Runs every benchmark one after another (they compete for the 2 cores if run together) and
# prints each one's table. docs/bench.md records the dated runs, and its Current figures table the
# current figure of each (test/readme's TestBenchFigures: every script here needs a row there).
set -euo pipefail
cd "$(dirname "$0")/../.."
for b in oem convert bzip2 fetch upload lint sysext-build preload preload-build build; do
  echo "=== scripts/bench/$b.sh"
  bash "scripts/bench/$b.sh"
done
