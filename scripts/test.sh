#!/usr/bin/env bash
# The whole test suite on a fresh machine: install what is missing, build, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)" "$@"

# Then the fast unit tests under ASan + UBSan (scripts/sanitizer_test.sh) and the threaded
# ones under ThreadSanitizer (scripts/tsan_test.sh), zero reports.
# CPINFER_SKIP_SANITIZERS=1 skips these stages for quick local runs; CI runs them.
if [[ "${CPINFER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  cd "$OLDPWD" && bash scripts/sanitizer_test.sh && bash scripts/tsan_test.sh
fi
