// Bar charts as SVG, drawn here: no chart library.
import { svg, h } from "./dom.js";

/**
 * A vertical bar chart. `bars`: [{label, value}], `format`: value -> text.
 * Returns a <figure> with the chart and a caption.
 */
export function barChart({ bars, format = String, caption = "", id = null }) {
  const width = 640;
  const height = 220;
  const left = 64;
  const bottom = 44;
  const top = 16;
  const plotH = height - bottom - top;
  const plotW = width - left - 12;
  const max = Math.max(0, ...bars.map((b) => Number(b.value) || 0));
  const step = bars.length ? plotW / bars.length : plotW;
  const barW = Math.max(4, Math.min(56, step * 0.7));
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    class: "chart", "aria-label": caption,
  });
  // axis and two grid lines
  for (const frac of [0, 0.5, 1]) {
    const y = top + plotH - frac * plotH;
    chart.append(svg("line", { x1: left, x2: width - 8, y1: y, y2: y, class: frac ? "grid" : "axis" }));
    chart.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, format(max * frac)));
  }
  bars.forEach((bar, i) => {
    const value = Number(bar.value) || 0;
    const barH = max > 0 ? (value / max) * plotH : 0;
    const x = left + i * step + (step - barW) / 2;
    const y = top + plotH - barH;
    const rect = svg("rect", { x, y, width: barW, height: Math.max(barH, value > 0 ? 1 : 0), class: "bar" });
    rect.append(svg("title", {}, `${bar.label}: ${format(value)}`));
    chart.append(rect);
    chart.append(svg("text", { x: x + barW / 2, y: height - bottom + 16, "text-anchor": "middle", class: "label" }, bar.label));
    chart.append(svg("text", { x: x + barW / 2, y: y - 4, "text-anchor": "middle", class: "value" }, format(value)));
  });
  if (!bars.length) {
    chart.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "nothing yet"));
  }
  return h("figure", { id }, chart, h("figcaption", {}, caption));
}
