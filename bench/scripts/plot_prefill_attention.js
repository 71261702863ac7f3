// Draws docs/prefill_attention_avx2.svg from prefill_attention_ab.sh's lines: for each head
// shape, KV dtype and thread count, the median GFLOP/s of the old and the new build as a
// fraction of the FMA peak measured in the same run (bench peak, per thread x threads).
// Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_prefill_attention.js [in.jsonl] [out.svg]
const fs = require("fs");
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
const keys = [...cases.keys()];
const W = 100 + 70 * keys.length, H = 360, pad = 60, ph = H - 2 * pad - 30, bw = 26;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`,
             `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "") =>
  svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
const y0 = pad + ph, ly = (f) => y0 - f * ph;
text(pad, pad - 30, `Prefill attention on AVX2, fraction of the FMA peak (${peak.toFixed(1)} ` +
     "GFLOP/s per thread), causal, 4096 tokens", 'font-weight="bold"');
svg.push(`<line x1="${pad}" y1="${y0}" x2="${W - 20}" y2="${y0}" stroke="black"/>`);
for (let f = 0; f <= 1.0001; f += 0.25) {
  text(pad - 34, ly(f) + 4, `${Math.round(f * 100)}%`);
  svg.push(`<line x1="${pad}" y1="${ly(f)}" x2="${W - 20}" y2="${ly(f)}" stroke="#ddd"/>`);
}
keys.forEach((k, i) => {
  const c = cases.get(k), x = pad + 10 + i * 70, [shape, threads] = k.split("|");
  [["old", "#c60"], ["new", "#06c"]].forEach(([b, color], j) => {
    if (!c[b].length) return;
    const f = median(c[b]) / (peak * c.threads);
    svg.push(`<rect x="${x + j * bw}" y="${ly(f)}" width="${bw - 3}" height="${y0 - ly(f)}" fill="${color}"/>`);
    text(x + j * bw - 2, ly(f) - 4, `${Math.round(f * 100)}`);
  });
  const [heads, kv] = shape.split(" ");
  text(x, y0 + 14, heads);
  text(x, y0 + 27, `${kv}, ${threads}t`);
});
text(pad, H - 8, "orange: the flash core before; blue: the blocked-lane kernel (attention_prefill_avx2.cpp). Heads: q/KV/head_dim.");
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
