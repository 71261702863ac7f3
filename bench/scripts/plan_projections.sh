#!/usr/bin/env bash
# Projections of the layout planner (not part of the test suite): for the Llama-3.1-8B and
# Qwen2.5-7B shapes (bench/configs/*/config.json) at 128k, 512k and 1M tokens on 1 to 64
# hosts of 32 cores with 25 Gbit/s links and 256 GiB each, bf16 KV: the recommended layout
# and its predicted TTFT, ITL, KV per rank and bytes per prefill step. The per-core rates are
# calibrated once on this machine (`cpinfer plan` on the qwen2.5-7b shape) and reused, so
# every projection assumes cores like this machine's. One JSON line per point to $OUT
# (default bench/results/plan_projections.jsonl) and a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
CPINFER=${CPINFER:-build/cpinfer}
OUT=${OUT:-bench/results/plan_projections.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
lscpu | grep "Model name"
cal=$("$CPINFER" plan --model bench/configs/qwen2.5-7b --context-len 4096 --json)
rates=$(node -e 'const c=JSON.parse(process.argv[1]); const m=c.machine;
  console.log(`--gemm-gflops-per-core ${m.gemm_gflops_per_core} --attention-gflops-per-core ${m.attention_gflops_per_core} --read-gbps-per-core ${m.read_gbps_per_core} --local-gbps ${m.local_gbps} --weight-read-gbps-per-core ${m.weight_read_gbps_per_core} --lm-head-read-gbps-per-core ${m.lm_head_read_gbps_per_core}`)' "$cal")
echo "calibrated: $rates"
for model in llama-3.1-8b qwen2.5-7b; do
  for ctx in 131072 524288 1048576; do
    for hosts in 1 2 4 8 16 32 64; do
      # shellcheck disable=SC2086
      "$CPINFER" plan --model "bench/configs/$model" --context-len "$ctx" --hosts "$hosts" \
        --cores-per-host 32 --link-gbps 25 --memory-gib 256 --kv-cache-dtype bf16 $rates --json |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
          const r=j.recommended; console.log(JSON.stringify({model:process.argv[1], context_len:j.context_len,
          hosts:j.machine.hosts, layouts:j.layouts.length, fitting:j.layouts.filter(l=>l.fits).length,
          recommended:r}))})' "$model" >>"$OUT"
    done
  done
done
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
console.log("| model | tokens | hosts | recommended (tp x pcp x dcp, threads) | TTFT | ITL | KV per rank | prefill bytes per step (rank 0) |");
console.log("|---|---|---|---|---|---|---|---|");
const t = (s) => s >= 3600 ? `${(s / 3600).toFixed(2)} h` : s >= 60 ? `${(s / 60).toFixed(1)} min` : `${s.toFixed(2)} s`;
for (const x of rows) {
  const r = x.recommended;
  if (!r) { console.log(`| ${x.model} | ${x.context_len / 1024}k | ${x.hosts} | none fits | | | | |`); continue; }
  console.log(`| ${x.model} | ${x.context_len / 1024}k | ${x.hosts} | ${r.tp} x ${r.pcp} x ${r.dcp}, ${r.threads_per_rank} | ${t(r.ttft_s)} | ${(r.itl_s * 1e3).toFixed(1)} ms | ${(r.kv_bytes_per_rank / 2 ** 30).toFixed(2)} GiB | ${(r.comm_bytes_per_step / 1e9).toFixed(1)} GB |`);
}' "$OUT"
