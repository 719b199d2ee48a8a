#!/usr/bin/env bash
# Runs every benchmark one after another (they compete for the 2 cores if run together) and
# prints each one's table; the README's performance section records these figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
for b in oem convert bzip2 fetch upload lint sysext-build preload preload-build build; do
  echo "=== scripts/bench/$b.sh"
  bash "scripts/bench/$b.sh"
done
