// Draws docs/prefix_cache.svg from bench/results/prefix_cache.jsonl (prefix_cache.sh). Left:
// per layout, the TTFT of the first request over the document (it prefills the document)
// and the median TTFT of the questions after it (they find the document cached), log scale.
// Right: per layout, median TPOT of 8 concurrent random requests with prefix caching on and
// off (medians over the repeats). Plain SVG.
// Usage: node bench/scripts/plot_prefix_cache.js [in.jsonl] [out.svg]
const fs = require("fs");
const inPath = process.argv[2] || "bench/results/prefix_cache.jsonl";
const outPath = process.argv[3] || "docs/prefix_cache.svg";
// Rows with an "engine" note were measured on an earlier engine and are kept for the record.
const rows = fs.readFileSync(inPath, "utf8").trim().split("\n").map(JSON.parse).filter((r) => !r.engine);
const median = (a) => { const s = [...a].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const layouts = [...new Set(rows.map((r) => r.layout))];
const name = (l) => (l === "one" ? "one rank" : l.replace("tp2-pcp2", "tp 2 x pcp 2"));
const doc = layouts.map((l) => {
  const rs = rows.filter((r) => r.part === "doc" && r.layout === l);
  return { l, first: median(rs.map((r) => r.bench.mean_ttft_first_of_prefix_ms)) / 1000,
           rep: median(rs.map((r) => r.bench.median_ttft_repeated_prefix_ms)) / 1000,
           hit: median(rs.map((r) => r.bench.hit_rate_of_shareable)) };
});
const dec = layouts.map((l) => {
  const t = (c) => median(rows.filter((r) => r.part === "decode" && r.layout === l && r.caching === c).map((r) => r.bench.median_tpot_ms));
  return { l, on: t(1), off: t(0) };
});
const W = 760, H = 380, top = 60, bottom = 300;
const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`, `<rect width="${W}" height="${H}" fill="white"/>`];
const text = (x, y, s, o = "", size = 11) => svg.push(`<text x="${x}" y="${y}" font-size="${size}" font-family="sans-serif" ${o}>${s}</text>`);
const bar = (x, y0, y1, w, c) => svg.push(`<rect x="${x}" y="${Math.min(y0, y1)}" width="${w}" height="${Math.abs(y1 - y0)}" fill="${c}"/>`);
text(20, 24, "Prefix caching: a 16k-token document, then questions of 64 tokens (qwen2.5-0.5b preset)", 'font-weight="bold"');
// Left panel: TTFT, log scale from 0.1 s to 1000 s.
const lx = 70, lw = 300, Y = (s) => bottom - ((Math.log10(s) + 1) / 4) * (bottom - top);
svg.push(`<line x1="${lx}" y1="${bottom}" x2="${lx + lw}" y2="${bottom}" stroke="black"/>`);
svg.push(`<line x1="${lx}" y1="${top}" x2="${lx}" y2="${bottom}" stroke="black"/>`);
for (const t of [0.1, 1, 10, 100, 1000]) { svg.push(`<line x1="${lx - 4}" y1="${Y(t)}" x2="${lx}" y2="${Y(t)}" stroke="black"/>`); text(lx - 40, Y(t) + 4, `${t} s`); }
text(lx, top - 10, "TTFT (log)");
doc.forEach((d, i) => {
  const x = lx + 20 + i * 140;
  bar(x, bottom, Y(d.first), 50, "#c33");
  bar(x + 55, bottom, Y(d.rep), 50, "#36c");
  text(x, Y(d.first) - 4, `${d.first.toFixed(1)} s`);
  text(x + 55, Y(d.rep) - 4, `${d.rep.toFixed(2)} s`);
  text(x, bottom + 16, name(d.l));
  text(x, bottom + 30, `${(d.first / d.rep).toFixed(0)}x, hit rate ${d.hit.toFixed(2)}`);
});
bar(lx + 10, 340, 350, 10, "#c33"); text(lx + 24, 349, "first request (prefills the document)");
bar(lx + 10, 356, 366, 10, "#36c"); text(lx + 24, 365, "questions 2..8, median (document cached)");
// Right panel: TPOT, linear.
const rx = 470, rw = 260, maxT = Math.max(...dec.flatMap((d) => [d.on, d.off])) * 1.2;
const Yt = (ms) => bottom - (ms / maxT) * (bottom - top);
svg.push(`<line x1="${rx}" y1="${bottom}" x2="${rx + rw}" y2="${bottom}" stroke="black"/>`);
svg.push(`<line x1="${rx}" y1="${top}" x2="${rx}" y2="${bottom}" stroke="black"/>`);
text(rx, top - 10, "median TPOT, 8 concurrent requests (ms)");
dec.forEach((d, i) => {
  const x = rx + 20 + i * 120;
  bar(x, bottom, Yt(d.on), 40, "#393");
  bar(x + 45, bottom, Yt(d.off), 40, "#999");
  text(x, Yt(d.on) - 4, d.on.toFixed(0));
  text(x + 45, Yt(d.off) - 4, d.off.toFixed(0));
  text(x, bottom + 16, name(d.l));
});
bar(rx + 10, 340, 350, 10, "#393"); text(rx + 24, 349, "prefix caching on");
bar(rx + 10, 356, 366, 10, "#999"); text(rx + 24, 365, "off");
svg.push("</svg>");
fs.writeFileSync(outPath, svg.join("\n") + "\n");
console.log(`wrote ${outPath}: ${JSON.stringify({ doc, dec })}`);
