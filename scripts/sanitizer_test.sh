#!/usr/bin/env bash
# The fast unit tests under AddressSanitizer + UndefinedBehaviorSanitizer: builds
# only the unit-test executables in build-asan (-DCPINFER_SANITIZER=address) and runs them
# with ctest. Any report fails: ASan and LSan exit non-zero, UBSan aborts (no recovery),
# and the test log is searched for reports as well. scripts/test.sh runs this after the
# normal ctest; CPINFER_SKIP_SANITIZERS=1 skips it there.
#   ASAN_BUILD_DIR   build folder (default build-asan)
#   ASAN_EXCLUDE     unit-test executables left out, a regex (default: the slow ones)
#   ASAN_CTEST_EXCLUDE  single tests left out, a ctest -E regex ("" for none; default: the big
#                    attention sweeps, whose edge shapes Attention.EdgeShapesSmall runs,
#                    the linear sweep's row counts other than 1, 3, 16, 17 and 100, the
#                    rope-scaling reference prefills and some GGUF twins (below))
# Extra arguments go to ctest (e.g. -R Engine).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
# Left out to stay within the CI time budget; see README.md ("Sanitizers").
ASAN_EXCLUDE=${ASAN_EXCLUDE:-forward_reference_test}
# The four attention sweeps: ~5 CPU-minutes under ASan; the normal ctest runs them in full,
# and Attention.EdgeShapesSmall runs their edge shapes here. The linear sweep (~4.5
# CPU-minutes under ASan in full): here only M = 1 (GEMV), 3 (skinny), 16 and 17 (a whole
# row block and one row past it) and 100 (several GEMM tiles), every dtype, N, K, ISA and
# path; the normal ctest runs all 14 row counts.
# Float64-reference and twin-file checks that are math, not memory: the rope-scaling prefills
# past the original context (~340 CPU-s under ASan, 25x their Release time; the same rope
# code runs here in RopeScalingReference.ChunkedPrefillThenDecode for every scaling type) and
# the GGUF twins of the YaRN configs (their rope.scaling keys: MalformedGguf here) and the
# Q8_0 twins but for tiny and llama (one reader path for every Q8_0 file).
ASAN_CTEST_EXCLUDE=${ASAN_CTEST_EXCLUDE-'^Attention\.(SweepLengths|SweepShapes|Bf16|Bf16DotPrefill)$|^All/LinearSweep\.MatchesFloat64Reference/.*_M(2|5|7|8|13|15|31|48|64)( |$)|^Types/RopeScalingReference\.PrefillPastOriginalContext/|^Presets/GgufTwin\.ConfigLogitsAndTokens/yarn|^Presets/GgufTwin\.Q8_0EqualsInt8AtLoad/(tiny_f16|tiny_f32|qwen3|yarn)'}

mapfile -t targets < <(ls tests/unit/*_test.cpp | xargs -n1 basename | sed 's/\.cpp$//' |
  grep -vxE "$ASAN_EXCLUDE")
echo "[sanitizers] ASan+UBSan: ${#targets[@]} unit-test executables (excluded: $ASAN_EXCLUDE;" \
  "tests excluded: ${ASAN_CTEST_EXCLUDE:-none})"
cmake -S . -B "$ASAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCPINFER_SANITIZER=address >/dev/null
build_start=$SECONDS
cmake --build "$ASAN_BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"
echo "[sanitizers] ASan+UBSan: built in $((SECONDS - build_start)) s"

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
cd "$ASAN_BUILD_DIR"
status=0
# Only the executables built above have tests labelled unit (the others: <name>_NOT_BUILT).
exclude=(); [[ -n "$ASAN_CTEST_EXCLUDE" ]] && exclude=(-E "$ASAN_CTEST_EXCLUDE")
ctest --output-on-failure -j"$(nproc)" -L unit "${exclude[@]}" "$@" || status=$?
# A report in a child process or a swallowed exit code would still be in the log.
if grep -nE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" Testing/Temporary/LastTest.log; then
  echo "[sanitizers] FAIL: sanitizer reports above (build-asan/Testing/Temporary/LastTest.log)" >&2
  exit 1
fi
((status == 0)) || { echo "[sanitizers] FAIL: ctest failed under ASan+UBSan" >&2; exit "$status"; }
echo "[sanitizers] ASan+UBSan: no reports"
