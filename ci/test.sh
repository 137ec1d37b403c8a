#!/usr/bin/env bash
# `make test`, what CI runs: every check, each step timed, then the 25 slowest tests, each step's time and
# the elapsed time against the budget (docs/contributing/testing.md).
#
#   setup ─┬─ toolchain (Go components, 2 at a time) ─ tools ─ render deps ─┐
#          └─ lint ─ unit tests (pytest -n 2, not e2e, not needs_tools) ────┴─ e2e + needs_tools tests (-n 2, by module)
#
# The Go builds keep about one of the 2 cores busy on average, and lint and the unit tests need nothing
# they build, so on a fresh machine the two branches overlap; warm, the builds are no-ops.
#
# Env: GPUPOOL_TEST_OUT (default out/test: step logs, JUnit XML, the report), GPUPOOL_BUDGET_FRESH_MIN
# (60) and GPUPOOL_BUDGET_WARM_MIN (15), GPUPOOL_UNIT_WORKERS (2) and GPUPOOL_E2E_WORKERS (3; 0 runs that
# step in one process),
# PYTEST_ADDOPTS (passed to every pytest run).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
OUT="${GPUPOOL_TEST_OUT:-out/test}"
rm -rf "$OUT"; mkdir -p "$OUT"
STEPS="$OUT/steps.tsv"
T_START=$(date +%s)
head -1 /proc/stat > "$OUT/cpu.start" 2>/dev/null || true  # the report prints the CPU shares (steal) of the run
say() { echo "[make test] $*" >&2; }

# step NAME CMD...: run CMD, append "NAME<TAB>seconds<TAB>rc" to STEPS; returns CMD's status.
step() {
  local name="$1" t0 rc; shift
  t0=$(date +%s)
  "$@"; rc=$?
  printf '%s\t%s\t%s\n' "$name" $(( $(date +%s) - t0 )) "$rc" >> "$STEPS"
  return "$rc"
}

report() {
  "$PY" ci/test_report.py --steps "$STEPS" --junit "$OUT"/*.xml --start "$T_START" --fresh "$FRESH" --cpu-start "$OUT/cpu.start" \
    --budget-fresh "${GPUPOOL_BUDGET_FRESH_MIN:-60}" --budget-warm "${GPUPOOL_BUDGET_WARM_MIN:-15}" \
    || say "(no report: ci/test_report.py failed)"
}

step setup make --no-print-directory setup VENV="$VENV" || { report; exit 1; }

# Fresh or warm: a run that has toolchain components to build is held to the fresh-machine budget.
if bash toolchain/build.sh --check >/dev/null 2>&1; then FRESH=0; else FRESH=1; fi

# The build branch, in the background; its output goes to a log, shown when it is done.
(
  step toolchain bash toolchain/build.sh >/dev/null \
    && step tools bash tools/build.sh >/dev/null \
    && step render-deps make --no-print-directory render-deps
) > "$OUT/build.log" 2>&1 &
BUILD_PID=$!
say "building the toolchain, tools and render deps in the background (log: $OUT/build.log)"

TOOLS_ENV=(
  GPUPOOL_REQUIRE_E2E=1 GPUPOOL_REQUIRE_RENDER=1 GPUPOOL_REQUIRE_TOOLS=1
  GPUPOOL_ACTIONLINT="$(bash tools/build.sh --print-bin-dir)/actionlint"
  GPUPOOL_AWAIT_EVAL="$(bash tools/build.sh --print-await)"
  GPUPOOL_TOOLCHAIN_BIN="$(bash toolchain/build.sh --print-bin-dir)"
)
workers="${GPUPOOL_UNIT_WORKERS:-2}"
xdist=(); [ "$workers" = 0 ] || xdist=(-n "$workers")

rc=0
step lint make --no-print-directory lint VENV="$VENV" || rc=1
step unit "$PY" -m pytest -q -m "not e2e and not needs_tools" "${xdist[@]}" --junitxml="$OUT/unit.xml" || rc=1

say "waiting for the build branch"
wait "$BUILD_PID"; build_rc=$?
cat "$OUT/build.log" >&2
if [ "$build_rc" -ne 0 ]; then
  say "the build branch failed (log above); the end-to-end tests cannot run"
  report; exit 1
fi

# Three workers on the 2 cores, one module each at a time (module fixtures: private control planes, one stack
# through a module); the longest modules go first (tests/e2e/conftest.py). A pulumi run mostly waits (on the
# engine, the provider, the API server): two workers left 16 % of the CPU idle, three 8 %, and the step went from
# 14 min 16 s to 11 min 23 s (docs/contributing/testing.md). GPUPOOL_E2E_WORKERS=0: one process.
e2e_workers="${GPUPOOL_E2E_WORKERS:-3}"
e2e_xdist=(); [ "$e2e_workers" = 0 ] || e2e_xdist=(-n "$e2e_workers" --dist loadfile)
step e2e env "${TOOLS_ENV[@]}" "$PY" -m pytest -q -m "e2e or needs_tools" "${e2e_xdist[@]}" --junitxml="$OUT/e2e.xml" || rc=1

report
exit "$rc"
