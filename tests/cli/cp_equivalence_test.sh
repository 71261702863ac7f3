#!/usr/bin/env bash
# Context-parallel equivalence (docs/context-parallel.md §9): every layout answers as
# one rank does: identical greedy tokens for 64 steps and logits within 1e-3, for prompt
# lengths 1, 2P-1, 2P, 2P+1, 777 and 3000, on `tiny` (16 q / 2 kv heads, 2 layers, bf16
# weights, f32 KV cache).
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
  cp_layout_matches "$TMP/base" "$TMP/run-$tp-$pcp-$dcp-$il" "$(lens_of "$pcp")" "$layout"
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layout/length combinations differ"; exit 1; }
echo "cp_equivalence_test: all layouts match the single-rank run"
