// Draws docs/prefill_attention_avx2.svg from prefill_attention_ab.sh's lines: for each head
// shape, KV dtype and thread count, the median GFLOP/s of the old and the new build as a
// fraction of the FMA peak measured in the same run (bench peak, per thread x threads).
// The chart itself: ab_bars.js.
// Usage: node bench/scripts/plot_prefill_attention.js [in.jsonl] [out.svg]
const fs = require("fs");
const { abBars } = require("./ab_bars.js");
const inPath = process.argv[2] || "bench/results/prefill_attention_avx2_zen3.jsonl";
const outPath = process.argv[3] || "docs/prefill_attention_avx2.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const peak = rows.filter((r) => r.peak).pop().peak.fma_gflops_per_thread;
const median = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const cases = new Map();  // "q/kv/d kv, T thr" -> {old: [...], new: [...], threads}
for (const r of rows.filter((r) => r.result)) {
  const x = r.result;
  const key = `${x.num_q_heads}/${x.num_kv_heads}/${x.head_dim} ${x.kv_cache_dtype}|${x.threads}`;
  if (!cases.has(key)) cases.set(key, { old: [], new: [], threads: x.threads });
  cases.get(key)[r.build].push(x.gflops);
}
const cases_ = [...cases.keys()].map((k) => {
  const c = cases.get(k), [shape, threads] = k.split("|"), [heads, kv] = shape.split(" ");
  const frac = (b) => (c[b].length ? median(c[b]) / (peak * c.threads) : null);
  return { old: frac("old"), new: frac("new"), labels: [heads, `${kv}, ${threads}t`] };
});
fs.writeFileSync(outPath, abBars({
  titles: [`Prefill attention on AVX2, fraction of the FMA peak (${peak.toFixed(1)} ` +
           "GFLOP/s per thread), causal, 4096 tokens"],
  cases: cases_,
  legend: "orange: the flash core before; blue: the blocked-lane kernel " +
          "(attention_prefill_avx2.cpp). Heads: q/KV/head_dim.",
}));
console.log(`wrote ${outPath}`);
