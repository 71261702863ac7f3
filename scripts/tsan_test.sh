#!/usr/bin/env bash
# The threaded unit tests under ThreadSanitizer: the thread pool (core_test), the engine loop
# with its client threads (engine_test), the HTTP server with the engine in one process
# (api_server_test), the communication worker thread (comm_worker_test) and the rank
# watchdog's listener thread against stranger and rank threads (watchdog_test). Builds those
# executables in build-tsan (-DCPINFER_SANITIZER=thread) and
# runs them with ctest; any report fails (halt_on_error, and the log is searched as well).
# Suppressions (tests/sanitizers/tsan.supp) are for third-party code only. scripts/test.sh
# runs this after the ASan stage; CPINFER_SKIP_SANITIZERS=1 skips both there.
#   TSAN_BUILD_DIR   build folder (default build-tsan)
#   TSAN_CTEST       the tests, a ctest -R regex (default below: the thread pool, two engine
#                    tests with client threads, cancels and stops, the server test, the
#                    communication worker and the watchdog's listener and registration; the
#                    engine's big batching tests take minutes under TSan: run them with
#                    TSAN_CTEST='^Engine\.' by hand)
# Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
TSAN_CTEST=${TSAN_CTEST:-'^(ThreadPool\.|Engine\.(CancelFreesPages|StopTokenIds)|ApiServer\.|CommWorker\.|WatchdogListener\.|WatchdogRegistration\.)'}
targets=(core_test engine_test api_server_test comm_worker_test watchdog_test)
echo "[sanitizers] TSan: ${targets[*]} (tests: $TSAN_CTEST)"
cmake -S . -B "$TSAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCPINFER_SANITIZER=thread >/dev/null
build_start=$SECONDS
cmake --build "$TSAN_BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"
echo "[sanitizers] TSan: built in $((SECONDS - build_start)) s"

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/sanitizers/tsan.supp"
cd "$TSAN_BUILD_DIR"
status=0
ctest --output-on-failure -j"$(nproc)" -L unit -R "$TSAN_CTEST" "$@" || status=$?
if grep -n "WARNING: ThreadSanitizer" Testing/Temporary/LastTest.log; then
  echo "[sanitizers] FAIL: ThreadSanitizer reports above (build-tsan/Testing/Temporary/LastTest.log)" >&2
  exit 1
fi
((status == 0)) || { echo "[sanitizers] FAIL: ctest failed under TSan" >&2; exit "$status"; }
echo "[sanitizers] TSan: no reports"
