// Bar chart of two builds side by side, as fractions of a peak: the SVG scaffolding that the
// A/B plot scripts share (plot_prefill_attention.js, plot_skinny_ab.js). Plain SVG, no
// dependencies.
//   abBars({ titles: [bold line, more lines...], cases: [{ old, new, labels: [line, line] }],
//            legend: [[color, text], ...] or a string, axis }) -> the SVG text
// old / new: fractions of the peak (null: no bar); bars in orange (old) and blue (new).
// axis (optional): { max, digits } for bars in a unit of their own (tokens/s, ms): old / new
// are then values in that unit, the axis runs from 0 to max, and labels show the values.
function abBars({ titles, cases, legend, axis }) {
  if (axis) {
    const digits = axis.digits ?? 0;
    const scaled = cases.map((c) => ({ ...c, old: c.old == null ? null : c.old / axis.max,
                                       new: c.new == null ? null : c.new / axis.max,
                                       values: [c.old, c.new] }));
    return draw({ titles, cases: scaled, legend,
                  tick: (f) => (f * axis.max).toFixed(digits),
                  value: (c, j) => c.values[j].toFixed(digits) });
  }
  return draw({ titles, cases, legend, tick: (f) => `${Math.round(f * 100)}%`,
                value: (c, j) => `${Math.round((j ? c.new : c.old) * 100)}` });
}

function draw({ titles, cases, legend, tick, value }) {
  const W = Math.max(440, 100 + 70 * cases.length), H = 360, pad = 60, ph = H - 2 * pad - 30, bw = 26;
  const svg = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">`,
               `<rect width="${W}" height="${H}" fill="white"/>`];
  const text = (x, y, s, o = "") =>
    svg.push(`<text x="${x}" y="${y}" font-size="11" font-family="sans-serif" ${o}>${s}</text>`);
  const y0 = pad + ph, ly = (f) => y0 - f * ph;
  titles.forEach((t, i) => text(pad, pad - 36 + 14 * i, t, i === 0 ? 'font-weight="bold"' : ""));
  svg.push(`<line x1="${pad}" y1="${y0}" x2="${W - 20}" y2="${y0}" stroke="black"/>`);
  for (let f = 0; f <= 1.0001; f += 0.25) {
    text(pad - 34, ly(f) + 4, tick(f));
    svg.push(`<line x1="${pad}" y1="${ly(f)}" x2="${W - 20}" y2="${ly(f)}" stroke="#ddd"/>`);
  }
  cases.forEach((c, i) => {
    const x = pad + 10 + i * 70;
    [[c.old, "#c60"], [c.new, "#06c"]].forEach(([f, color], j) => {
      if (f == null) return;
      svg.push(`<rect x="${x + j * bw}" y="${ly(f)}" width="${bw - 3}" height="${y0 - ly(f)}" fill="${color}"/>`);
      text(x + j * bw - 2, ly(f) - 4, value(c, j));
    });
    c.labels.forEach((l, k) => text(x, y0 + 14 + 13 * k, l));
  });
  if (typeof legend === "string") {
    text(pad, H - 8, legend);
  } else {
    legend.forEach(([color, label], j) => {  // one entry per line
      const y = H - 8 - 15 * (legend.length - 1 - j);
      svg.push(`<rect x="${pad}" y="${y - 10}" width="12" height="12" fill="${color}"/>`);
      text(pad + 16, y, label);
    });
  }
  svg.push("</svg>");
  return svg.join("\n");
}

module.exports = { abBars };
