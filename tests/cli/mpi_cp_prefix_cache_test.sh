#!/usr/bin/env bash
# Runs tests/mpi/cp_prefix_cache_test.cpp under mpiexec: prefix caching through the real engine
# on several layouts (cached answers equal uncached ones, the layout's hits equal one rank's).
# One rank's answers (uncached, and the cached engine's hits) are the same for every layout:
# the first layout computes them, checks one rank's cached answers against its uncached
# ones and writes them to a file; the other layouts compare against that file
# (--references) instead of running the two single-rank engines again.
set -euo pipefail
BIN=${CPINFER_BINARY_DIR:?}/tests/cp_prefix_cache_test
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
MCA=(--bind-to none --oversubscribe)
[[ $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0) == 0 ]] ||
  MCA+=(--mca btl_vader_single_copy_mechanism none)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
# tp pcp dcp interleave.
for layout in "2 2 1 1" "2 2 1 8" "2 2 1 16" "4 2 2 8" "1 3 1 1"; do
  read -r tp pcp dcp il <<<"$layout"
  np=$((tp * pcp))
  CPINFER_THREADS_PER_RANK=1 timeout 600 mpiexec -q -np "$np" "${MCA[@]}" -x CPINFER_THREADS_PER_RANK \
    "$BIN" --tp "$tp" --pcp "$pcp" --dcp "$dcp" --interleave "$il" --references "$TMP/one-rank.bin" ||
    failures=$((failures + 1))
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layouts"; exit 1; }
echo "mpi_cp_prefix_cache_test: every layout's cached answers and hits match one rank"
