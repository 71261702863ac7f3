#!/usr/bin/env bash
# Context-parallel equivalence (docs/context-parallel.md §9): every layout answers as
# one rank does: identical greedy tokens for 64 steps and logits within 1e-3, for prompt
# lengths 1, 2P-1, 2P, 2P+1, 777 and 3000, on `tiny` (16 q / 2 kv heads, 2 layers, f32).
# The reference layouts (tp, pcp, dcp, interleave), plus tensor parallelism alone and an
# odd PCP size.
set -euo pipefail
CPINFER=${1:?usage: cp_equivalence_test.sh path/to/cpinfer}
source "$(dirname "$0")/lib/cp_runs.sh"
LAYOUTS=${CP_TEST_LAYOUTS:-"1,2,1,1 1,4,1,16 2,2,1,8 4,1,2,1 4,1,2,8 4,2,2,8 2,1,1,1 4,1,1,1 1,3,1,1 2,3,1,4"}

failures=0
for layout in $LAYOUTS; do
  IFS=, read -r tp pcp dcp il <<<"$layout"
  lens="1 $((2 * pcp - 1)) $((2 * pcp)) $((2 * pcp + 1)) 777 3000"
  for n in $(tr ' ' '\n' <<<"$lens" | sort -n | uniq); do
    base="$TMP/base-$n"
    [[ -f "$base.json" ]] || cp_run "$base" "$n"
    out="$TMP/run-$tp-$pcp-$dcp-$il-$n"
    cp_run "$out" "$n" -tp "$tp" -pcp "$pcp" -dcp "$dcp" --cp-kv-cache-interleave-size "$il"
    node "$SRC/tests/tools/compare_runs.js" "$base.json" "$base.bin" "$out.json" "$out.bin" 1e-3 \
      "tp $tp pcp $pcp dcp $dcp interleave $il, prompt $n" || failures=$((failures + 1))
  done
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layout/length combinations differ"; exit 1; }
echo "cp_equivalence_test: all layouts match the single-rank run"
