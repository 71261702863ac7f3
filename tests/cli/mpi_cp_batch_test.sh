#!/usr/bin/env bash
# Runs tests/mpi/cp_batch_test.cpp under mpiexec for several CP layouts (mixed batches:
# four prefills in one step, batched decodes, a prefill admitted beside running decodes).
set -euo pipefail
BIN=${CPINFER_BINARY_DIR:?}/tests/cp_batch_test
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
MCA=(--bind-to none --oversubscribe)
[[ $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0) == 0 ]] ||
  MCA+=(--mca btl_vader_single_copy_mechanism none)
failures=0
# tp pcp dcp interleave [block size]
for layout in "1 2 1 1" "1 4 1 16" "2 2 1 8" "4 1 2 1" "4 1 2 8 8" "4 2 2 8" "1 3 1 1" "2 1 1 1"; do
  read -r tp pcp dcp il bs <<<"$layout"
  np=$((tp * pcp))
  CPINFER_THREADS_PER_RANK=1 timeout 300 mpiexec -q -np "$np" "${MCA[@]}" -x CPINFER_THREADS_PER_RANK \
    "$BIN" --tp "$tp" --pcp "$pcp" --dcp "$dcp" --interleave "$il" --block-size "${bs:-16}" ||
    failures=$((failures + 1))
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layouts"; exit 1; }
echo "mpi_cp_batch_test: all layouts match the single-rank engine"
