#!/usr/bin/env bash
# The launcher (tests/mpi/launcher_test.cpp, src/dist/launcher.cpp): flag parsing, relaunching
# under mpirun from a plain start, threads per rank, and failures: a rank that throws (or
# returns non-zero) while the others wait in a barrier must end the whole job promptly, with
# the rank named, whether we launched mpirun or the user did; a world of the wrong size and a
# missing mpirun are clear errors.
set -euo pipefail
BIN=${CPINFER_BINARY_DIR:?}/tests/launcher_test
[[ -x "$BIN" ]] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
if ! command -v mpiexec >/dev/null; then
  echo "FAIL: mpiexec not found (apt-get install openmpi-bin)" >&2; exit 1
fi
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
MPIEXEC=(mpiexec --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/out "$TMP"/err; do [[ -f $f ]] && sed 's/^/  | /' "$f" >&2; done
  exit 1
}

# run <expected-status|nonzero> <cmd...>: runs with a 60 s guard, records wall time in $WALL.
run() {
  local want=$1; shift
  local t0=$EPOCHREALTIME rc=0
  timeout 60 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  WALL=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  [[ $rc -ne 124 ]] || fail "timed out (hang): $*"
  if [[ $want == nonzero ]]; then [[ $rc -ne 0 ]] || fail "exit 0, expected failure: $*"
  else [[ $rc -eq $want ]] || fail "exit $rc, expected $want: $*"; fi
}
fast() { awk -v w="$WALL" 'BEGIN { exit !(w < 10) }' || fail "took ${WALL}s (limit 10 s): $*"; }
has() { grep -qF -- "$1" "$TMP/$2" || fail "'$1' not in std$2"; }

# gtest part: flags, mpirun command line, threads per rank (no MPI involved).
run 0 env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK "$BIN" --gtest_color=no
has "PASSED" out

# Started plainly with tp 2 x pcp 2: relaunched under mpirun with 4 ranks.
cpus=$(nproc)
run 0 "$BIN" --mode run -tp 2 -pcp 2
[[ $(grep -c "ok threads $(( cpus / 4 > 0 ? cpus / 4 : 1 )) mpi 1" "$TMP/out") -eq 4 ]] \
  || fail "expected 4 ranks with $(( cpus / 4 > 0 ? cpus / 4 : 1 )) threads each"
echo "ok   relaunch 4 ranks (${WALL}s)"
run 0 "$BIN" --mode run -tp 2 --threads-per-rank 3 --expect-threads 3
[[ $(grep -c "ok threads 3" "$TMP/out") -eq 2 ]] || fail "--threads-per-rank 3 not applied"
# World of one: runs in this process, no MPI.
run 0 "$BIN" --mode run
has "rank 0 of 1 ok" out
has "mpi 0" out

# A rank throws while the others wait in a barrier: the job ends, naming the rank.
run nonzero "$BIN" --mode run -tp 2 -pcp 2 --fail-rank 1
has "cpinfer: rank 1 failed: injected failure on purpose" err
fast "relaunched, rank 1 throws"
echo "ok   relaunched job, rank 1 throws: exit non-zero in ${WALL}s"
run nonzero "${MPIEXEC[@]}" -np 4 "$BIN" --mode run -tp 4 --fail-rank 3
has "cpinfer: rank 3 failed: injected failure on purpose" err
fast "user mpiexec, rank 3 throws"
echo "ok   user mpiexec -np 4, rank 3 throws: exit non-zero in ${WALL}s"
run nonzero "${MPIEXEC[@]}" -np 8 "$BIN" --mode run -tp 2 -pcp 4 --fail-rank 5
has "cpinfer: rank 5 failed" err
fast "user mpiexec, 8 ranks, rank 5 throws"
echo "ok   user mpiexec -np 8, rank 5 throws: exit non-zero in ${WALL}s"
# A non-zero return is passed on as the job's status.
run 3 "$BIN" --mode run -tp 2 --fail-rank 0 --fail-how return
has "cpinfer: rank 0 failed: exit status 3" err
fast "rank 0 returns 3"

# The user's mpiexec with the wrong number of ranks.
run nonzero "${MPIEXEC[@]}" -np 3 "$BIN" --mode run -tp 2
has "mpirun started 3 ranks but tensor-parallel-size 2 x prefill-context-parallel-size 1" err
has "needs 2 (use mpirun -np 2)" err
[[ $(grep -c "mpirun started" "$TMP/err") -eq 1 ]] || fail "the size error should be printed once"

# No mpirun: a clear error, not a crash.
run 2 env PATH=/nonexistent "$BIN" --mode run -tp 2
has "mpirun was not found on PATH" err
run 2 env CPINFER_MPIRUN=/nonexistent/mpirun "$BIN" --mode run -tp 2
has "CPINFER_MPIRUN '/nonexistent/mpirun' is not an executable file" err
echo "mpi_launcher_test: all passed"
