#!/usr/bin/env bash
# One long prefill under context parallelism (not part of the test suite): a prompt of
# >= 131072 tokens on `tiny` with 2 layers (its config.json's max_position_embeddings raised
# from 32768 to 262144; the weights are synthetic, so nothing else changes), prefilled in
# chunks of 2048 (generate's default) on one rank x 2 threads and under pcp 2 x 1 thread,
# 4 greedy tokens each. The pcp 2 logits are compared with one rank's (1e-3, identical
# tokens; tests/tools/compare_runs.js) and each run's TTFT and KV bytes per rank recorded.
# One JSON line per run to $OUT (default bench/results/cp_long_run.jsonl).
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/cp_long_run.jsonl}
TOKENS=${TOKENS:-131072}
mkdir -p "$(dirname "$OUT")" models
: >"$OUT"
: >"${OUT%.jsonl}.log"
M=models/tiny-L2-256k
if [[ ! -f "$M/model.safetensors" ]]; then
  "$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 11 --out "$M"
  node -e 'const fs=require("fs"),f=process.argv[1],c=JSON.parse(fs.readFileSync(f));c.max_position_embeddings=262144;fs.writeFileSync(f,JSON.stringify(c,null,2))' "$M/config.json"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# A deterministic text of random words that encodes to at least $TOKENS tokens.
node -e '
  let x = 12345; const r = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const syl = ["ka","lo","mi","ren","sto","va","qu","zel","dor","fin","ex","pra","tum","gle"];
  const w = []; for (let i = 0; i < +process.argv[1]; i++) { let s = ""; const n = 1 + Math.floor(r() * 3);
    for (let j = 0; j < n; j++) s += syl[Math.floor(r() * syl.length)]; w.push(s); }
  process.stdout.write(w.join(" "));' $((TOKENS * 10 / 21)) >"$TMP/prompt.txt"
n=$("$CPINFER" tokenize --model "$M" --text-file "$TMP/prompt.txt" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).ids.length))')
echo "prompt: $n tokens"
(( n >= TOKENS )) || { echo "the prompt has only $n tokens; raise the word count" >&2; exit 1; }
lscpu | grep "Model name"
run() {  # run NAME layout-flags...
  local name=$1; shift
  /usr/bin/time -f "%e s wall, %M KB max RSS (rank 0's process tree: mpirun's)" \
    "$CPINFER" generate --model "$M" --prompt-file "$TMP/prompt.txt" --max-tokens 4 --ignore-eos \
    --generation-config vllm --kv-cache-dtype f32 --json --logits-out "$TMP/$name.bin" "$@" >"$TMP/$name.json" 2>"$TMP/$name.err"
  tail -1 "$TMP/$name.err"
  node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n").pop());
    console.log(JSON.stringify({run: process.argv[2], prompt_tokens: j.prompt_tokens, ttft_s: j.ttft_s,
      prefill_tokens_per_s: j.prefill_tokens_per_s, kv_bytes_per_rank: j.kv_bytes_per_rank,
      layout: j.layout, threads_per_rank: j.threads_per_rank, token_ids: j.token_ids}))' "$TMP/$name.json" "$name" | tee -a "$OUT"
}
run one --threads-per-rank 2
run pcp2 -pcp 2 --threads-per-rank 1
node tests/tools/compare_runs.js "$TMP/one.json" "$TMP/one.bin" "$TMP/pcp2.json" "$TMP/pcp2.bin" 1e-3 \
  "pcp 2 at $n tokens" | tee -a "${OUT%.jsonl}.log"
