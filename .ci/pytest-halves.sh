#!/usr/bin/env bash
# The tests in two halves (`make test`: both; `make check`: the first):
#   unit         every test not marked integration, in parallel (pytest-xdist, JOBS workers,
#                default auto: one per core); CPU-bound, so they share the machine well
#   integration  the tests marked integration, in INTEGRATION_JOBS workers (default 4; 0: in
#                this process, one at a time), laid out by tests/lanes.py (--lanes): a test
#                module at a time per worker, the longest first (tests/durations.json), the
#                JVM and Docker modules one at a time while clock-bound ones wait; the 15
#                slowest listed. They start real processes and wait on the clock far more
#                than they use the CPU (a short before/after run: ~55 s, ~8 s of CPU): four
#                lanes took 13m46s against 22m43s for two workers of --dist loadfile
# Usage: pytest-halves.sh all|unit [pytest arguments for both halves...]
# `all` runs the integration half even when the unit half failed (every failure is seen),
# not when it was interrupted (Ctrl-C: pytest's exit 2).
# Exit: the first half's code that is neither 0 nor 5 (pytest's "no tests collected"); 5
# only when no half ran a test, so an empty run never passes; else 0.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
JOBS=${JOBS:-auto}
INTEGRATION_JOBS=${INTEGRATION_JOBS:-4}
what=${1:-all}
shift || true
case $what in
  all | unit) ;;
  *) echo "pytest-halves.sh: all or unit, not '$what'" >&2; exit 2 ;;
esac

trap 'exit 130' INT TERM
codes=()
"$PYTEST" -q -p xdist -n "$JOBS" -m 'not integration' "$@"
codes+=($?)
if [ "$what" = all ] && [ "${codes[0]}" != 2 ]; then
  "$PYTEST" -q -p xdist -n "$INTEGRATION_JOBS" --lanes --durations=15 -m integration "$@"
  codes+=($?)
fi

status=5
for code in "${codes[@]}"; do
  if [ "$code" != 0 ] && [ "$code" != 5 ]; then
    status=$code
    break
  elif [ "$code" = 0 ]; then
    status=0
  fi
done
if [ "$status" = 5 ]; then
  echo "pytest-halves.sh: no test ran in any half (${codes[*]}): that is a failure" >&2
fi
exit "$status"
