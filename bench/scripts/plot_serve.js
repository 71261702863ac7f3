// Draws docs/serve_latency.svg from bench/results/serve_bench.jsonl (serve_bench.sh): for
// each layout and request rate, the medians over repeated runs of TTFT (left) and
// inter-token latency (right) at p50 / p90 / p99. Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_serve.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/serve_bench.jsonl";
const outPath = process.argv[3] || "docs/serve_latency.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const median = (a) => { const s = [...a].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
// Groups: "tp 1 pcp 1, rate inf" -> runs.
const groups = new Map();
for (const r of rows) {
  const key = `${r.layout}, rate ${r.result.request_rate ?? "inf"}`;
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(r.result);
}
const keys = [...groups.keys()];
const W = 900, H = 380, pad = 50, gap = 60, pw = (W - 2 * pad - gap) / 2, ph = H - 2 * pad - 40;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`, `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "", size = 11) => svg.push(`<text x="${x}" y="${y}" font-size="${size}" font-family="sans-serif" ${o}>${s}</text>`);
const colors = ["#9cf", "#39c", "#036"];
function panel(x0, title, metric, unit, scale) {
  const y0 = pad + ph;
  text(x0, pad - 20, title, 'font-weight="bold"');
  const vals = keys.map((k) => ["p50", "p90", "p99"].map((p) => median(groups.get(k).map((r) => r[`${p === "p50" ? "median" : p}_${metric}_ms`])) / scale));
  const max = Math.max(...vals.flat());
  const gw = pw / keys.length, bw = gw / 4;
  keys.forEach((k, i) => {
    vals[i].forEach((v, j) => {
      const h = (v / max) * ph, x = x0 + i * gw + j * bw + bw / 2;
      svg.push(`<rect x="${x}" y="${y0 - h}" width="${bw - 2}" height="${h}" fill="${colors[j]}"/>`);
      text(x - 2, y0 - h - 3, v < 10 ? v.toFixed(2) : v.toFixed(0), "", 9);
    });
    const [layout, rate] = k.split(", ");
    text(x0 + i * gw + bw / 2, y0 + 14, layout);
    text(x0 + i * gw + bw / 2, y0 + 27, rate);
  });
  svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0 + pw}" y2="${y0}" stroke="black"/>`);
  text(x0, y0 + 45, `${unit}; bars: p50, p90, p99 (medians over ${groups.get(keys[0]).length} runs)`);
}
panel(pad, "Time to first token", "ttft", "seconds", 1000);
panel(pad + pw + gap, "Inter-token latency", "itl", "milliseconds", 1);
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
