#!/usr/bin/env bash
# Runs tests/mpi/cp_allocations_test.cpp under mpiexec: a warm forward step (a chunk over
# cached context beside a decode, and decode steps) allocates nothing on any rank of a
# context-parallel layout.
set -euo pipefail
BIN=${CPINFER_BINARY_DIR:?}/tests/cp_allocations_test
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
MCA=(--bind-to none --oversubscribe)
[[ $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0) == 0 ]] ||
  MCA+=(--mca btl_vader_single_copy_mechanism none)
failures=0
for layout in "1 2 1 8" "2 2 1 1" "4 1 2 16" "4 2 2 8"; do
  read -r tp pcp dcp il <<<"$layout"
  CPINFER_THREADS_PER_RANK=1 timeout 300 mpiexec -q -np $((tp * pcp)) "${MCA[@]}" \
    -x CPINFER_THREADS_PER_RANK "$BIN" --tp "$tp" --pcp "$pcp" --dcp "$dcp" --interleave "$il" ||
    failures=$((failures + 1))
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layouts allocate per step"; exit 1; }
echo "mpi_cp_allocations_test: no allocation per step on any layout"
