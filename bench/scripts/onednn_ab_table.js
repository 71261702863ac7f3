// The table of bench/scripts/onednn_ab.sh: for each shape, M and thread count, the best
// GFLOP/s (fastest single call, median over repetitions) of ours (f32 and bf16 weights) and of
// oneDNN (f32, bf16), and ours over oneDNN's best. Ours is whichever ISA path the run holds
// (avx512 or avx2). Usage: node onednn_ab_table.js [JSON]
const fs = require("fs");
const j = JSON.parse(fs.readFileSync(process.argv[2] || "bench/results/onednn_ab.json", "utf8"));
const best = {};
for (const b of j.benchmarks) {
  if (b.aggregate_name !== "median") continue;
  const m = b.run_name.match(/^(onednn|avx512|avx2)\/(f32|bf16)\/(\w+)\/K:(\d+)\/N:(\d+)\/M:(\d+)\/threads:(\d)/);
  if (!m) continue;
  const [, who, dt, shape, K, N, M, t] = m;
  const key = `${shape} ${K}x${N} M ${M} t ${t}`;
  (best[key] = best[key] || {})[`${who === "onednn" ? who : "ours"}_${dt}`] = b["best_GFLOP/s"];
}
console.log("| shape (K x N) | M | threads | ours f32 W | ours bf16 W | oneDNN f32 | oneDNN bf16 (bf16 x) | ours best / oneDNN best |");
console.log("|---|---|---|---|---|---|---|---|");
for (const [k, v] of Object.entries(best)) {
  const [shape, kn, , M, , t] = k.split(" ");
  const ours = Math.max(v.ours_f32 || 0, v.ours_bf16 || 0), theirs = Math.max(v.onednn_f32 || 0, v.onednn_bf16 || 0);
  const f = (x) => (x ? x.toFixed(0) : "-");
  console.log(`| ${shape} (${kn}) | ${M} | ${t} | ${f(v.ours_f32)} | ${f(v.ours_bf16)} | ${f(v.onednn_f32)} | ${f(v.onednn_bf16)} | ${(ours / theirs).toFixed(2)} |`);
}
