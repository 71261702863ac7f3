// Draws docs/cp_long_prompt.svg from bench/results/cp_long_prompt_itl.jsonl
// (cp_long_prompt_itl.sh): the trade-off of chunked prefill under context parallelism. Each
// point is one scenario (medians over its runs): x = the long prompt's TTFT relative to the
// unchunked run, y = the running streams' longest inter-token gap (max ITL, log scale: the
// stall that a p99 over many tokens can hide), relative to their p99 ITL without the long
// prompt. The green box is the goal: p99 ITL <= 3x, TTFT <= 1.15x. Chunked runs with a
// token budget are blue, runs with --step-time-target-ms orange. Plain SVG.
// Usage: node bench/scripts/plot_cp_long_prompt.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/cp_long_prompt_itl.jsonl";
const outPath = process.argv[3] || "docs/cp_long_prompt.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const median = (a) => { const s = [...a].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const key = (r) =>
  r.scenario === "chunked" ? `chunked ${r.budget}` : r.scenario === "timed" ? `target ${r.target_ms} ms` : r.scenario;
const groups = new Map();
for (const r of rows) { if (!groups.has(key(r))) groups.set(key(r), []); groups.get(key(r)).push(r); }
const alone = median(groups.get("alone").map((r) => r.streams.p99_itl_ms));
const unchunkedTtft = median(groups.get("unchunked").map((r) => r.long_prompt.median_ttft_ms));
const points = [...groups.entries()].filter(([k]) => k !== "alone").map(([k, rs]) => ({
  k,
  x: median(rs.map((r) => r.long_prompt.median_ttft_ms)) / unchunkedTtft,
  y: median(rs.map((r) => r.streams.max_itl_ms)) / alone,
}));
const W = 640, H = 420, pad = 70;
const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
const x0 = Math.min(0.95, ...xs), x1 = Math.max(...xs) * 1.05;
const ly0 = Math.log10(Math.min(1, ...ys)), ly1 = Math.log10(Math.max(...ys) * 1.5);
const X = (x) => pad + ((x - x0) / (x1 - x0)) * (W - 2 * pad);
const Y = (y) => H - pad - ((Math.log10(y) - ly0) / (ly1 - ly0)) * (H - 2 * pad);
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`, `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "", size = 11) => svg.push(`<text x="${x}" y="${y}" font-size="${size}" font-family="sans-serif" ${o}>${s}</text>`);
text(pad, 24, "8 streams decoding while a 16k-token prompt arrives (pcp 2, tiny 8 layers)", 'font-weight="bold"');
svg.push(`<line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="black"/>`);
svg.push(`<line x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}" stroke="black"/>`);
// Target box: p99 ITL <= 3x and TTFT <= 1.15x.
svg.push(`<rect x="${X(x0)}" y="${Y(3)}" width="${X(1.15) - X(x0)}" height="${Y(Math.pow(10, ly0)) - Y(3)}" fill="#dfd"/>`);
text(X(x0) + 4, Y(3) + 14, "target", 'fill="#393"');
for (const t of [1, 3, 10, 30, 100, 300, 1000]) {
  if (Math.log10(t) < ly0 || Math.log10(t) > ly1) continue;
  svg.push(`<line x1="${pad - 4}" y1="${Y(t)}" x2="${pad}" y2="${Y(t)}" stroke="black"/>`);
  text(pad - 34, Y(t) + 4, `${t}x`);
}
for (let t = Math.ceil(x0 * 10) / 10; t <= x1; t += 0.1) {
  svg.push(`<line x1="${X(t)}" y1="${H - pad}" x2="${X(t)}" y2="${H - pad + 4}" stroke="black"/>`);
  text(X(t) - 10, H - pad + 16, t.toFixed(1));
}
text(W / 2 - 150, H - 20, "long prompt's TTFT / unchunked TTFT");
text(8, pad - 12, "streams' max ITL / their p99 ITL alone (log)");
const placed = [];  // label positions so far: a label close to an earlier one moves down
for (const p of points) {
  let ly = Y(p.y) + 4;
  while (placed.some(([x, y]) => Math.abs(x - X(p.x)) < 90 && Math.abs(y - ly) < 12)) ly += 12;
  placed.push([X(p.x), ly]);
  const color = p.k === "unchunked" ? "#c33" : p.k.startsWith("target") ? "#e80" : "#36c";
  svg.push(`<circle cx="${X(p.x)}" cy="${Y(p.y)}" r="5" fill="${color}"/>`);
  text(X(p.x) + 8, ly, p.k === "unchunked" ? "unchunked (one step)" : p.k.replace("chunked ", "budget "));
}
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n") + "\n");
console.log(`wrote ${outPath}: ${points.map((p) => `${p.k} (${p.x.toFixed(2)}, ${p.y.toFixed(1)})`).join("; ")}`);
