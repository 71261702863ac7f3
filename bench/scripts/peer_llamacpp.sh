#!/usr/bin/env bash
# cpinfer beside llama.cpp on the same GGUF file: the qwen2.5-0.5b preset at full depth
# (`make-model --format gguf`, bf16 weights by default), the same threads (1 and 2), f32 KV
# cache on both. Prefill tokens/s at 512, 2048 and 8192 prompt tokens; decode tokens/s at
# depth 0 and 8192. llama.cpp runs through node-llama-cpp's prebuilt CPU library
# (bench/scripts/peer_llamacpp.mjs: batches of 512 tokens, flash attention left to
# llama.cpp's "auto"); cpinfer through `bench latency` (prefill: --output-len 1, decode:
# --output-len DECODE_TOKENS+1 after a max(depth, 1)-token prompt). Medians of ITERS runs
# after WARMUP untimed ones. One JSON line per measurement to $OUT (default
# bench/results/peer_llamacpp.jsonl), each with busy_jiffies: the CPU time of all processes
# (this run's included) while it ran, to compare with threads x its wall time. Not part of
# the test suite: the full run takes about an hour on 2 cores; run it on a quiet machine.
#
# Environment: CPINFER (build/cpinfer), MODEL (models/qwen2.5-0.5b-gguf, or
# models/qwen2.5-0.5b-gguf-q8 with QUANT=int8), DTYPE (bf16; f16 also works in both engines),
# QUANT (none; int8: the matrices stored as Q8_0 blocks in the GGUF file, quantized from the
# DTYPE values, which both engines read as they are), THREADS ("1 2"), PREFILL ("512 2048 8192"), DEPTHS
# ("0 8192"), DECODE_TOKENS (32), ITERS (3), WARMUP (1), OUT.
# A smoke run: PREFILL=128 DEPTHS=0 DECODE_TOKENS=16 ITERS=1 WARMUP=0 THREADS=2 OUT=/tmp/x.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
QUANT=${QUANT:-none}
case "$QUANT" in
  none) MODEL=${MODEL:-models/qwen2.5-0.5b-gguf} ;;
  int8) MODEL=${MODEL:-models/qwen2.5-0.5b-gguf-q8} ;;
  *) echo "QUANT=$QUANT: none or int8" >&2; exit 2 ;;
esac
DTYPE=${DTYPE:-bf16}
THREADS=${THREADS:-1 2}
PREFILL=${PREFILL:-512 2048 8192}
DEPTHS=${DEPTHS:-0 8192}
DECODE_TOKENS=${DECODE_TOKENS:-32}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
OUT=${OUT:-bench/results/peer_llamacpp.jsonl}
mkdir -p "$(dirname "$OUT")"
if [[ ! -f "$MODEL/model.gguf" ]]; then
  "$CPINFER" make-model --preset qwen2.5-0.5b --dtype "$DTYPE" --format gguf \
    --quantization "$QUANT" --out "$MODEL"
fi
GGUF="$MODEL/model.gguf"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
: >"$OUT"
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
# emit ENGINE_JSON BUSY0: the line with the commit, dtype, quantization and CPU time of all
# processes added.
emit() {
  node -e 'const j = JSON.parse(process.argv[1]);
    Object.assign(j, {cpinfer_commit: process.argv[2], dtype: process.argv[3],
      quantization: process.argv[5], busy_jiffies: +process.argv[4]});
    console.log(JSON.stringify(j));' "$1" "$COMMIT" "$DTYPE" "$(( $(busy) - $2 ))" "$QUANT" | tee -a "$OUT"
}
# cpinfer LINE_FIELDS ARGS...: one bench latency run, reduced to the fields compared.
cpinfer_line() {
  local fields=$1; shift
  "$CPINFER" bench latency --model "$GGUF" --num-iters "$ITERS" --warmup "$WARMUP" \
    --kv-cache-dtype f32 --json "$@" 2>/dev/null | tail -n 1 |
    node -e 'let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
      const r = JSON.parse(s), f = JSON.parse(process.argv[1]);
      const tps = f.what === "prefill" ? r.prefill_tokens_per_s : r.decode_tokens_per_s;
      console.log(JSON.stringify({engine: "cpinfer", threads: r.threads_per_rank, kv_cache: r.kv_cache_dtype,
        ...f, tokens_per_s: tps, ttft_s: r.ttft_s, itl_s: r.itl_s, mfu: r.mfu, mbu: r.mbu, model: r.model}));
    })' "$fields"
}

for t in $THREADS; do
  for n in $PREFILL; do
    b0=$(busy)
    emit "$(cpinfer_line "{\"what\":\"prefill\",\"tokens\":$n}" --threads-per-rank "$t" \
      --input-len "$n" --output-len 1)" "$b0"
    b0=$(busy)
    emit "$(node bench/scripts/peer_llamacpp.mjs --model "$GGUF" --threads "$t" --prefill "$n" \
      --iters "$ITERS" --warmup "$WARMUP")" "$b0"
  done
  for d in $DEPTHS; do
    b0=$(busy)
    emit "$(cpinfer_line "{\"what\":\"decode\",\"depth\":$d,\"decode_tokens\":$DECODE_TOKENS}" \
      --threads-per-rank "$t" --input-len "$(( d > 1 ? d : 1 ))" --output-len "$(( DECODE_TOKENS + 1 ))")" "$b0"
    b0=$(busy)
    emit "$(node bench/scripts/peer_llamacpp.mjs --model "$GGUF" --threads "$t" --depths "$d" \
      --decode-tokens "$DECODE_TOKENS" --iters "$ITERS" --warmup "$WARMUP")" "$b0"
  done
done
