#!/usr/bin/env bash
# Runs every `func FuzzXxx` in the module briefly (default 8s each): no panics on any input.
# FUZZ_EXCLUDE (a regexp of names; default: the go-diskfs GPT oracle, an evaluation aid whose
# reference reader misreads by design) is left out; FUZZ_ONLY runs just the names it matches.
# New inputs are minimised for at most 100 runs, so short runs spend their time fuzzing.
# Under `make test` (TEST_JSON_DIR and TEST_SUMMARY set) each run's `go test -json` goes to
# TEST_JSON_DIR/fuzz.json for the summary line, and a failure is shown through TEST_SUMMARY.
set -euo pipefail
export FLATCAR_CAPO_REAL_TESTS=1 # the real tier: fuzz targets that check against mkfs and friends run them
fuzztime=${1:-8s}
cd "$(dirname "$0")/.."
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
json=()
if [ -n "${TEST_JSON_DIR:-}" ] && [ -x "${TEST_SUMMARY:-}" ]; then
  json=(-json)
  mkdir -p "$TEST_JSON_DIR"
fi
while read -r file name; do
  if [ -n "${FUZZ_ONLY:-}" ] && ! [[ $name =~ ^(${FUZZ_ONLY})$ ]]; then continue; fi
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $name ($fuzztime)"
  for try in 1 2; do
    if go test "${json[@]}" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 100x "$pkg" > "$log" 2>&1; then
      if ((${#json[@]})); then cat "$log" >> "$TEST_JSON_DIR/fuzz.json"; fi
      break
    fi
    # Go's fuzz coordinator sometimes ends with "context deadline exceeded" and no failing
    # input; that is the harness, not our code: try once more. A real crash names its input.
    if [ "$try" = 1 ] && ! grep -q "Failing input written" "$log"; then
      echo "fuzz: $name: harness timeout without a failing input; retrying once"; continue
    fi
    if ((${#json[@]})); then
      cat "$log" >> "$TEST_JSON_DIR/fuzz.json"
      "$TEST_SUMMARY" < "$log" || true
    else
      cat "$log"
    fi
    status=1; break
  done
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' pkg | sed -E 's/:func / /' | grep -vE " (${FUZZ_EXCLUDE:-FuzzGPTReadersAgree})\$")
exit $status
