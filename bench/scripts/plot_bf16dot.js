// Draws docs/bf16dot_crossover.svg from bench/results/bf16dot_crossover_zen5.jsonl (one
// `linear_bench` run, 2 threads, bf16 weights: GFLOP/s of the f32 skinny tiles, the f32
// packed GEMM and the bf16-dot GEMM at each M; files with the bf16-dot skinny tiles too,
// such as skinny_bf16dot_zen5.jsonl, get a fourth line): one panel per shape, M on a log
// axis, the bf16-dot peak of the two threads as a dashed line. Plain SVG, no dependencies.
// Usage: node bench/scripts/plot_bf16dot.js [in.jsonl] [out.svg] [peak GFLOP/s]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/bf16dot_crossover_zen5.jsonl";
const outPath = process.argv[3] || "docs/bf16dot_crossover.svg";
const peak = Number(process.argv[4] || 2 * 371);
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse);
const W = 320 * rows.length + 60, H = 340, pad = 50, pw = 250, ph = H - 2 * pad - 20;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`,
             `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "") =>
  svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
const colors = { skinny: "#c60", gemm: "#999", gemm_bf16dot: "#06c", skinny_bf16dot: "#090" };
rows.forEach((r, i) => {
  const x0 = pad + i * 320, y0 = pad + ph;
  const Ms = Object.keys(r.gflops).map(Number).sort((a, b) => a - b);
  const lx = (m) => x0 + (Math.log2(m) - Math.log2(Ms[0])) / (Math.log2(Ms[Ms.length - 1]) - Math.log2(Ms[0])) * pw;
  const maxY = peak * 1.05, ly = (v) => y0 - (v / maxY) * ph;
  text(x0, pad - 20, `${r.shape} (K ${r.K}, N ${r.N})`, 'font-weight="bold"');
  svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0 + pw}" y2="${y0}" stroke="black"/>`);
  svg.push(`<line x1="${x0}" y1="${y0}" x2="${x0}" y2="${pad}" stroke="black"/>`);
  for (const m of Ms) text(lx(m) - 8, y0 + 15, `${m}`);
  for (let v = 0; v <= maxY; v += 200) text(x0 - 30, ly(v) + 4, `${v}`);
  svg.push(`<line x1="${x0}" y1="${ly(peak)}" x2="${x0 + pw}" y2="${ly(peak)}" stroke="#06c" stroke-dasharray="4 3"/>`);
  for (const k of Object.keys(colors).filter((k) => Ms.every((m) => r.gflops[m][k] !== undefined))) {
    const d = Ms.map((m, j) => `${j ? "L" : "M"}${lx(m)},${ly(r.gflops[m][k])}`).join(" ");
    svg.push(`<path d="${d}" fill="none" stroke="${colors[k]}" stroke-width="2"/>`);
    for (const m of Ms) svg.push(`<circle cx="${lx(m)}" cy="${ly(r.gflops[m][k])}" r="3" fill="${colors[k]}"/>`);
  }
});
const hasDotSkinny = rows.some((r) => Object.values(r.gflops).some((g) => g.skinny_bf16dot !== undefined));
text(pad, H - 8, `GFLOP/s vs M (rows), 2 threads. blue: bf16-dot GEMM, ` +
     (hasDotSkinny ? "green: bf16-dot skinny tiles, " : "") +
     `orange: f32 skinny tiles, grey: f32 GEMM; dashed: bf16-dot peak (${peak}). ${rows[0].cpu}.`);
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n"));
console.log(`wrote ${outPath}`);
