// Draws docs/skinny_avx2.svg from skinny_ab.sh's lines: for each M (decode batch rows) and
// thread count, the median over rounds of each build's best GFLOP/s, averaged over the
// shapes, as a fraction of the FMA peak measured in the same run (per thread x threads).
// The chart itself: ab_bars.js.
// Usage: node bench/scripts/plot_skinny_ab.js [in.jsonl] [out.svg]
const fs = require("fs");
const { abBars } = require("./ab_bars.js");
const inPath = process.argv[2] || "bench/results/skinny_avx2_zen3.jsonl";
const outPath = process.argv[3] || "docs/skinny_avx2.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const head = rows.filter((r) => r.peak).pop();
const peak = head.peak.fma_gflops_per_thread;
const median = (a) => { const s = [...a].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const runs = new Map();  // "M|threads|shape|build" -> best GFLOP/s of each round
for (const r of rows.filter((r) => r.name)) {
  const key = `${r.M}|${r.threads}|${r.shape}|${r.build}`;
  if (!runs.has(key)) runs.set(key, []);
  runs.get(key).push(r.best_gflops);
}
const cases = new Map();  // "M|threads" -> {old: [median per shape], new: [...]}
for (const [key, v] of runs) {
  const [M, threads, , build] = key.split("|");
  const c = `${M}|${threads}`;
  if (!cases.has(c)) cases.set(c, { old: [], new: [], threads: +threads, M: +M });
  cases.get(c)[build].push(median(v));
}
const keys = [...cases.keys()].sort((a, b) => {
  const [ma, ta] = a.split("|").map(Number), [mb, tb] = b.split("|").map(Number);
  return ta - tb || ma - mb; });
const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
fs.writeFileSync(outPath, abBars({
  titles: ["bf16 linear layers at decode batch sizes (M x rows) on AVX2",
           `fraction of the FMA peak (${peak.toFixed(1)} GFLOP/s per thread, ${head.cpu}), ` +
           "mean over the Qwen2.5-0.5B shapes of each one's median best call"],
  cases: keys.map((k) => {
    const c = cases.get(k);
    const frac = (b) => (c[b].length ? mean(c[b]) / (peak * c.threads) : null);
    return { old: frac("old"), new: frac("new"), labels: [`M ${c.M}`, `${c.threads} thr`] };
  }),
  legend: [["#c60", "before: plain tiles (at M 4 the GEMV), bf16 widened by shuffle + shift"],
           ["#06c", "pair tiles (one load + one integer op per 8 weights)"]],
}));
console.log(`wrote ${outPath}`);
