// Draws docs/cp_scaling.svg from bench/results/cp_scaling.jsonl (written by cp_scaling.sh):
// left, time to first token per PCP size for each prompt length; right, KV bytes per rank
// relative to W = 1 against the ideal 1/W. Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_cp.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/cp_scaling.jsonl";
const outPath = process.argv[3] || "docs/cp_scaling.svg";
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const W = 900, H = 360, pad = 50, gap = 60, pw = (W - 2 * pad - gap) / 2, ph = H - 2 * pad - 20;
const svg = [];
const text = (x, y, s, o = "") => svg.push(`<text x="${x}" y="${y}" font-size="12" font-family="sans-serif" ${o}>${s}</text>`);
svg.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`);
svg.push(`<rect width="${W}" height="${H}" fill="white"/>`);
// Left: TTFT bars.
const scal = rows.filter(r => r.tag.startsWith("scaling"));
const maxT = Math.max(...scal.map(r => r.result.ttft_s));
const x0 = pad, y0 = pad + ph;
text(x0, pad - 20, "Time to first token, qwen2.5-0.5b shape (8 layers), 1 thread per rank", 'font-weight="bold"');
const bw = pw / (scal.length * 1.5);
scal.forEach((r, i) => {
  const t = r.result.ttft_s, h = (t / maxT) * ph, x = x0 + i * bw * 1.5 + bw * 0.25;
  const color = r.result.layout.pcp === 1 ? "#888" : r.result.layout.pcp === 2 ? "#2a7" : "#27a";
  svg.push(`<rect x="${x}" y="${y0 - h}" width="${bw}" height="${h}" fill="${color}"/>`);
  text(x, y0 - h - 4, `${t.toFixed(1)} s`);
  text(x, y0 + 14, `pcp ${r.result.layout.pcp}`);
  text(x, y0 + 28, `${r.result.input_len / 1024}k tok`);
});
svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0 + pw}" y2="${y0}" stroke="black"/>`);
// Right: KV per rank ratio vs W.
const kv = rows.filter(r => r.tag === "kv");
const x1 = pad + pw + gap;
text(x1, pad - 20, "KV bytes per rank / single-rank figure (tiny, 4096 tokens)", 'font-weight="bold"');
const Ws = kv.map(r => r.result.layout.pcp * r.result.layout.dcp);
const maxW = Math.max(...Ws);
const px = (w) => x1 + (Math.log2(w) / Math.log2(maxW)) * pw;
const py = (f) => y0 - f * ph;  // fraction in [0, 1]
svg.push(`<line x1="${x1}" y1="${y0}" x2="${x1 + pw}" y2="${y0}" stroke="black"/>`);
svg.push(`<line x1="${x1}" y1="${y0}" x2="${x1}" y2="${pad}" stroke="black"/>`);
for (const w of [1, 2, 4, 8]) if (w <= maxW) text(px(w) - 4, y0 + 14, `W=${w}`);
for (const f of [0.25, 0.5, 1]) text(x1 - 34, py(f) + 4, f.toFixed(2));
let ideal = "";
for (let w = 1; w <= maxW; w *= 1.05) ideal += `${ideal ? "L" : "M"}${px(w)},${py(1 / w)} `;
svg.push(`<path d="${ideal}" stroke="#888" fill="none" stroke-dasharray="4,3"/>`);
text(px(maxW) - 60, py(1 / maxW) - 10, "ideal 1/W", 'fill="#888"');
kv.forEach((r, i) => {
  const w = Ws[i], f = r.result.kv_bytes_per_rank / r.result.kv_bytes_without_cp;
  svg.push(`<circle cx="${px(w)}" cy="${py(f)}" r="5" fill="#2a7"/>`);
});
text(x1, H - 8, "dots: measured layouts (pcp, dcp, tp x pcp x dcp)", 'fill="#2a7"');
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n") + "\n");
console.log(`wrote ${outPath}`);
