#!/usr/bin/env bash
# --quantization int8 under parallel layouts: tensor-parallel shards quantize the same
# 32-column blocks as one rank holding the whole tensor, so every layout answers as the
# single-rank int8 run (identical greedy tokens, logits within 1e-3, as the context-parallel
# equivalence tests) with --int8-math exact (f32 activations). With --int8-math dot the
# activations are quantized to int8 too, and a last-bit difference upstream (another
# layout's summation order) can flip one activation's rounding by a whole step (1/127 of its
# block's largest value), so layouts are held to the quantization's own error instead:
# logits within D = max |logits(one rank, dot) - logits(one rank, exact)| over the rows
# before their greedy tokens part, tokens identical or parting only on a near tie (the two
# tokens' logits within 2 D; compare_runs.js near-tie), as cp_chunked_equivalence_test does
# for bf16 dot products; and dot must differ from exact (the activations were quantized).
# The int8 logits differ from the unquantized run's; bad values are refused before any rank
# starts; bench latency reports the quantization, the int8 math used and Q8_0's bytes.
set -euo pipefail
CPINFER=${1:?usage: quantization_test.sh path/to/cpinfer}
# An f32 model (quantized from f32 values; the byte ratio below counts 4-byte weights).
CP_TEST_DTYPE=f32
source "$(dirname "$0")/lib/cp_runs.sh"
STEPS=16
LENS="7 300"
declare -A dot_bound

cp_runs "$TMP/int8" "$LENS" --quantization int8
cp_runs "$TMP/none" "$LENS"
failures=0
for layout in 2,2,1,8 4,1,2,1; do
  IFS=, read -r tp pcp dcp il <<<"$layout"
  out="$TMP/int8-$tp-$pcp-$dcp-$il"
  cp_runs "$out" "$LENS" --quantization int8 -tp "$tp" -pcp "$pcp" -dcp "$dcp" \
    --cp-kv-cache-interleave-size "$il"
  for n in $LENS; do
    node "$SRC/tests/tools/compare_runs.js" "$TMP/int8-$n.json" "$TMP/int8-$n.bin" \
      "$out-$n.json" "$out-$n.bin" 1e-3 "int8, tp $tp pcp $pcp dcp $dcp interleave $il, prompt $n" ||
      failures=$((failures + 1))
  done
done

# --int8-math dot: one rank against exact gives the bound D, then the layouts against one
# rank's dot run within D. Forced dot quantizes on every CPU (without AVX512_VNNI the f32
# kernels run on the quantized values), so nothing is skipped.
cp_runs "$TMP/dot" "$LENS" --quantization int8 --int8-math dot
for n in $LENS; do
  D=$(node -e 'const fs=require("fs"); const r=f=>{const b=fs.readFileSync(f); return new Float32Array(b.buffer,b.byteOffset,b.length/4)};
    const last=f=>JSON.parse(fs.readFileSync(f,"utf8").trim().split("\n").pop());
    const [d,e]=process.argv.slice(1); const a=r(d+".bin"), b=r(e+".bin");
    const ta=last(d+".json").token_ids, tb=last(e+".json").token_ids;
    let k=0; while (k<ta.length-1 && ta[k]===tb[k]) k++;
    const V=a.length/ta.length; let m=0;
    for (let i=0;i<(k+1)*V;i++){const x=Math.abs(a[i]-b[i]); if(!(x<=m)) m=x;} console.log(m)' \
    "$TMP/dot-$n" "$TMP/int8-$n")
  echo "int8 dot bound for prompt $n: one rank's dot and exact logits differ by up to $D"
  node -e 'process.exit(+process.argv[1] > 1e-4 ? 0 : 1)' "$D" ||
    { echo "FAIL: --int8-math dot gives the exact logits (within 1e-4): the activations were not quantized"; exit 1; }
  dot_bound[$n]=$D
done
for layout in 2,2,1,8 4,1,2,1; do
  IFS=, read -r tp pcp dcp il <<<"$layout"
  out="$TMP/dot-$tp-$pcp-$dcp-$il"
  cp_runs "$out" "$LENS" --quantization int8 --int8-math dot -tp "$tp" -pcp "$pcp" \
    -dcp "$dcp" --cp-kv-cache-interleave-size "$il"
  for n in $LENS; do
    node "$SRC/tests/tools/compare_runs.js" "$TMP/dot-$n.json" "$TMP/dot-$n.bin" \
      "$out-$n.json" "$out-$n.bin" "${dot_bound[$n]}" \
      "int8 dot, tp $tp pcp $pcp dcp $dcp interleave $il, prompt $n" near-tie ||
      failures=$((failures + 1))
  done
done
[[ $failures -eq 0 ]] || { echo "FAIL: $failures int8 layout/length combinations differ"; exit 1; }

# Quantization changes the logits (by far more than the layouts' 1e-3).
for n in $LENS; do
  if node "$SRC/tests/tools/compare_runs.js" "$TMP/none-$n.json" "$TMP/none-$n.bin" \
       "$TMP/int8-$n.json" "$TMP/int8-$n.bin" 1e-2 "int8 vs none, prompt $n" >"$TMP/cmp.out"; then
    cat "$TMP/cmp.out"
    echo "FAIL: the int8 run matches the unquantized one within 1e-2: nothing was quantized"
    exit 1
  fi
  echo "ok   int8 differs from the unquantized run, prompt $n: $(sed 's/.* -- //' "$TMP/cmp.out")"
done

# A value outside none|int8 is refused at parse time, naming the flag.
if "$CPINFER" generate --model "$MODEL" --prompt-ids 1,2 --quantization int4 -tp 2 \
     >"$TMP/bad.out" 2>&1; then
  echo "FAIL: --quantization int4 was accepted"; exit 1
fi
grep -q -- "--quantization" "$TMP/bad.out" || { echo "FAIL: the error does not name --quantization"; cat "$TMP/bad.out"; exit 1; }
grep -q "int4" "$TMP/bad.out" || { echo "FAIL: the error does not name the value"; cat "$TMP/bad.out"; exit 1; }

# bench latency names the quantization and counts Q8_0's 34 bytes per 32 weights.
"$CPINFER" bench latency --model "$MODEL" --input-len 8 --output-len 4 --num-iters 1 \
  --warmup 0 --json --quantization int8 2>/dev/null | tail -1 >"$TMP/lat8.json"
"$CPINFER" bench latency --model "$MODEL" --input-len 8 --output-len 4 --num-iters 1 \
  --warmup 0 --json 2>/dev/null | tail -1 >"$TMP/lat.json"
node -e '
  const fs = require("fs");
  const q = JSON.parse(fs.readFileSync(process.argv[1])), f = JSON.parse(fs.readFileSync(process.argv[2]));
  if (q.quantization !== "int8" || f.quantization !== "none") throw new Error("quantization field: " + q.quantization + ", " + f.quantization);
  // f32 tiny model: the weights move from 4 bytes to 34/32; KV bytes are the same in both.
  const kv = 2 * 2 * 2 * 32 * 4 * (8 + 2);  // layers 2, K and V, 2 kv heads, head_dim 32, f32, mean context 10
  const wq = q.decode_bytes_per_token - kv, wf = f.decode_bytes_per_token - kv;
  const ratio = wq / wf;
  if (Math.abs(ratio - 34 / 32 / 4) > 1e-9) throw new Error("weight bytes ratio " + ratio + ", want " + 34 / 128);
  console.log("bench latency: quantization int8, decode weight bytes x" + ratio.toFixed(4) + " of f32");
' "$TMP/lat8.json" "$TMP/lat.json"
# A GGUF file whose matrices are already Q8_0 (no --quantization flag): the same bytes, and
# the prefill's unit is the int8 dot (AVX512_VNNI) or fp32 FMA, not the bf16 dot.
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype "$CP_TEST_DTYPE" --format gguf \
  --quantization int8 --vocab-size "$CP_TEST_VOCAB" --out "$TMP/q8gguf" >/dev/null 2>&1
"$CPINFER" bench latency --model "$TMP/q8gguf" --input-len 8 --output-len 4 --num-iters 1 \
  --warmup 0 --json 2>/dev/null | tail -1 >"$TMP/latg.json"
node -e '
  const fs = require("fs");
  const q = JSON.parse(fs.readFileSync(process.argv[1])), g = JSON.parse(fs.readFileSync(process.argv[2]));
  if (q.weights_q8_0 !== true || g.weights_q8_0 !== true) throw new Error("weights_q8_0: " + q.weights_q8_0 + ", " + g.weights_q8_0);
  if (g.decode_bytes_per_token !== q.decode_bytes_per_token)
    throw new Error("Q8_0 GGUF decode bytes " + g.decode_bytes_per_token + ", --quantization int8 " + q.decode_bytes_per_token);
  // The prefill unit: int8 dot products where the CPU has AVX512_VNNI (--int8-math auto),
  // else fp32 FMAs (never the bf16 dot unit: the weights are not bf16).
  const vnni = / avx512_vnni /.test(" " + fs.readFileSync("/proc/cpuinfo", "utf8").split("\n").find(l => l.startsWith("flags")) + " ");
  const want = vnni ? "int8_vnni512" : "fp32_fma";
  if (g.mfu_unit !== want) throw new Error("Q8_0 GGUF mfu_unit " + g.mfu_unit + ", want " + want);
  console.log("bench latency: a Q8_0 GGUF file counts Q8_0 bytes (" + g.decode_bytes_per_token + ")");
' "$TMP/lat8.json" "$TMP/latg.json"
echo "quantization_test: int8 layouts match the single-rank int8 run"
