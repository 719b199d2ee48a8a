#!/usr/bin/env bash
# Runs every `func FuzzXxx` in the module briefly (default 8s each): no panics on any input.
# New inputs are minimised for at most 100 runs, so short runs spend their time fuzzing.
set -euo pipefail
fuzztime=${1:-8s}
cd "$(dirname "$0")/.."
status=0
while read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 100x "$pkg" > /tmp/fuzz-$$.log 2>&1; then
    cat /tmp/fuzz-$$.log; status=1
  fi
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' pkg | sed -E 's/:func / /')
rm -f /tmp/fuzz-$$.log
exit $status
