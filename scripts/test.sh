#!/usr/bin/env bash
# The whole test suite on a fresh machine: install what is missing, build, run ctest.
# Each stage prints its wall time ("[test] build: 412 s"), and the end a summary line, so a
# CI log shows where the time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAGES=()
source scripts/lib/cpu_time.sh
stage() {  # stage NAME command...: runs the command and records its wall time
  local name=$1 start=$SECONDS b0; shift
  b0=$(busy_jiffies)
  "$@"
  # How busy the machine's CPUs were over the stage (whole machine, /proc/stat): a stage well
  # under 100% leaves cores idle that another stage could use.
  local secs=$((SECONDS - start)) busy=$(($(busy_jiffies) - b0))
  local pct=$((secs > 0 ? busy * 100 / (secs * $(getconf CLK_TCK) * $(nproc)) : 0))
  STAGES+=("$name $secs s")
  echo "[test] $name: $secs s (CPUs ${pct}% busy)"
}
stage setup bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
stage build cmake --build "$BUILD_DIR" -j"$(nproc)"
cd "$BUILD_DIR"
stage ctest ctest --output-on-failure -j"$(nproc)" "$@"
cd "$ROOT"

# Then the fast unit tests under ASan + UBSan (scripts/sanitizer_test.sh) and the threaded
# ones under ThreadSanitizer (scripts/tsan_test.sh), zero reports.
# CPINFER_SKIP_SANITIZERS=1 skips these stages for quick local runs; CI runs them.
if [[ "${CPINFER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  stage asan bash scripts/sanitizer_test.sh
  stage tsan bash scripts/tsan_test.sh
fi
summary=$(printf "%s, " "${STAGES[@]}")
echo "[test] passed in $SECONDS s (${summary%, })"
