#!/usr/bin/env bash
# The tests in two halves (`make test`: both; `make check`: the first):
#   unit         every test not marked integration, in parallel (pytest-xdist, JOBS workers,
#                default auto: one per core); CPU-bound, so they share the machine well
#   integration  the tests marked integration, in INTEGRATION_JOBS workers (default 4; 0: in
#                this process, one at a time), laid out by tests/lanes.py (--lanes): a test
#                module at a time per worker, the longest first (tests/durations.json),
#                the JVM and Docker modules one at a time while clock-bound ones wait; the
#                15 slowest listed. They start real processes and wait on the clock far more
#                than they use the CPU (a short before/after run: ~55 s, ~8 s of CPU)
# SETUP, when set, is a command making what only the integration half needs (`make test`:
# the Debian packages, the Docker base image, the npm packages, the spring-shop and WireMock jars). It
# runs beside the unit half, which needs none of it (on a fresh machine it is minutes of
# downloads and builds), its output kept in a file and shown once it ends; the integration
# half starts when it has ended, and not at all when it failed.
# Usage: pytest-halves.sh all|unit [pytest arguments for both halves...]
# `all` runs the integration half even when the unit half failed (every failure is seen),
# not when it was interrupted (Ctrl-C: pytest's exit 2).
# Exit: SETUP's code when it failed; else the first half's code that is neither 0 nor 5
# (pytest's "no tests collected"); 5 only when no half ran a test, so an empty run never
# passes; else 0.
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

setup_pid=
setup_log=
stop_setup() {
  if [ -n "$setup_pid" ]; then
    kill -TERM -- "-$setup_pid" 2>/dev/null || kill -TERM "$setup_pid" 2>/dev/null || true
    wait "$setup_pid" 2>/dev/null || true
  fi
  if [ -n "$setup_log" ]; then rm -f "$setup_log"; fi
}
trap 'stop_setup; exit 130' INT TERM
if [ "$what" = all ] && [ -n "${SETUP:-}" ]; then
  setup_log=$(mktemp)
  echo "setup, beside the unit half: $SETUP"
  set -m # its own process group, so an interrupt stops all of it
  bash -c "$SETUP" >"$setup_log" 2>&1 </dev/null &
  setup_pid=$!
  set +m
fi

codes=()
"$PYTEST" -q -p xdist -n "$JOBS" -m 'not integration' "$@"
codes+=($?)
if [ -n "$setup_pid" ]; then
  wait "$setup_pid"
  setup_code=$?
  setup_pid=
  echo "---- setup ($SETUP), exit $setup_code:"
  cat "$setup_log"
  rm -f "$setup_log"
  setup_log=
  if [ "$setup_code" != 0 ]; then
    echo "pytest-halves.sh: the setup failed (exit $setup_code): no integration half" >&2
    exit "$setup_code"
  fi
fi
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
