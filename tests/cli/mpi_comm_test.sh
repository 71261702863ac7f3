#!/usr/bin/env bash
# Comm under a real mpiexec (tests/mpi/comm_test.cpp): every collective on every group at
# 1, 2, 4 and 8 ranks (8 is oversubscribed on small hosts) with several TP/PCP/DCP layouts.
# The mpiexec flags are the ones cpinfer's launcher uses (src/dist/launcher.cpp):
# --oversubscribe (more ranks than cores), --bind-to none, and mpi_yield_when_idle 1 so that
# waiting ranks do not spin on a core another rank needs.
set -euo pipefail
BIN=${CPINFER_BINARY_DIR:?}/tests/comm_test
[[ -x "$BIN" ]] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
if ! command -v mpiexec >/dev/null; then
  echo "FAIL: mpiexec not found (apt-get install openmpi-bin)" >&2; exit 1
fi
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
MPIEXEC=(mpiexec --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# np | layout flags (heads: 16 q; --hkv sets KV heads, default 1)
CONFIGS=(
  "1|"
  "2|--tp 2 --dcp 2"
  "2|--tp 1 --pcp 2"
  "4|--tp 2 --pcp 2 --dcp 2"
  "4|--tp 4 --dcp 2 --hkv 2"
  "8|--tp 4 --pcp 2 --dcp 2 --hkv 2"
  "8|--tp 2 --pcp 4"
)
start=$EPOCHREALTIME
for cfg in "${CONFIGS[@]}"; do
  np=${cfg%%|*}; flags=${cfg#*|}
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2086
  if ! timeout 60 "${MPIEXEC[@]}" -np "$np" "$BIN" --gtest_color=no $flags >"$TMP/out" 2>&1; then
    cat "$TMP/out" >&2
    echo "FAIL: comm_test at -np $np $flags" >&2
    exit 1
  fi
  grep -q "PASSED" "$TMP/out" || { cat "$TMP/out" >&2; echo "FAIL: no PASSED line" >&2; exit 1; }
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v c="np $np $flags" \
    'BEGIN { printf "ok   %-36s %5.2f s\n", c, b - a }'
done
awk -v a="$start" -v b="$EPOCHREALTIME" \
  'BEGIN { printf "mpi_comm_test: all passed in %.1f s\n", b - a }'
