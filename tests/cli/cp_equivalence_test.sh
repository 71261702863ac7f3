#!/usr/bin/env bash
# Context-parallel equivalence (docs/context-parallel.md §9): every layout answers as
# one rank does: identical greedy tokens for 64 steps and logits within 1e-3, for prompt
# lengths 1, 2P-1, 2P, 2P+1, 777 and 3000, on `tiny` (16 q / 2 kv heads, 2 layers, f32).
# The reference layouts (tp, pcp, dcp, interleave), plus tensor parallelism alone and an
# odd PCP size. One launch per layout runs all its prompt lengths (and one the single-rank
# baselines): tests/cli/lib/cp_runs.sh.
set -euo pipefail
CPINFER=${1:?usage: cp_equivalence_test.sh path/to/cpinfer}
source "$(dirname "$0")/lib/cp_runs.sh"
LAYOUTS=${CP_TEST_LAYOUTS:-"1,2,1,1 1,4,1,16 2,2,1,8 4,1,2,1 4,1,2,8 4,2,2,8 2,1,1,1 4,1,1,1 1,3,1,1 2,3,1,4"}

lens_of() {  # lens_of PCP: the prompt lengths checked for that PCP size, sorted, distinct
  tr ' ' '\n' <<<"1 $((2 * $1 - 1)) $((2 * $1)) $((2 * $1 + 1)) 777 3000" | sort -n | uniq | xargs
}
all=$(for layout in $LAYOUTS; do IFS=, read -r _ pcp _ _ <<<"$layout"; lens_of "$pcp"; done |
  tr ' ' '\n' | sort -n | uniq | xargs)
cp_runs "$TMP/base" "$all"  # one rank

failures=0
for layout in $LAYOUTS; do
  IFS=, read -r tp pcp dcp il <<<"$layout"
  lens=$(lens_of "$pcp")
  out="$TMP/run-$tp-$pcp-$dcp-$il"
  cp_runs "$out" "$lens" -tp "$tp" -pcp "$pcp" -dcp "$dcp" --cp-kv-cache-interleave-size "$il"
  for n in $lens; do
    node "$SRC/tests/tools/compare_runs.js" "$TMP/base-$n.json" "$TMP/base-$n.bin" \
      "$out-$n.json" "$out-$n.bin" 1e-3 "tp $tp pcp $pcp dcp $dcp interleave $il, prompt $n" ||
      failures=$((failures + 1))
  done
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layout/length combinations differ"; exit 1; }
echo "cp_equivalence_test: all layouts match the single-rank run"
