import { View, parse } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { VegaLiteSpec } from "./charts.js";

/**
 * Draws a Vega-Lite spec as an SVG string, headless: vega-lite compiles it to Vega, and Vega's
 * SVG string renderer writes the scene graph with no DOM and no canvas (text widths are
 * estimated). The output has no external references (fonts are generic families), so the
 * report opens from disk with no network.
 */
const CONFIG = {
  // Static pictures: no ARIA attribute on every mark (a chart's whole description would repeat
  // per point); the report says in words what each chart shows.
  aria: false,
  background: "white",
  padding: 8,
  font: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
  title: { fontSize: 14, anchor: "start" },
  axis: { labelFontSize: 10, titleFontSize: 11, titleFontWeight: "normal" },
  header: { labelFontSize: 12 },
  view: { stroke: "#ddd" },
};

/** Renders one chart. Deterministic: the same spec gives the same SVG. */
export async function renderSvg(spec: VegaLiteSpec, title?: string): Promise<string> {
  const full = { ...spec, ...(title ? { title } : {}), config: CONFIG } as unknown as TopLevelSpec;
  const view = new View(parse(compile(full).spec), { renderer: "none" });
  try {
    return compact(await view.toSVG());
  } finally {
    view.finalize();
  }
}

/**
 * Rounds the coordinates Vega writes with full double precision (in path data and transforms
 * only, never in text) to a tenth of a pixel: a third smaller, nothing visible changes.
 */
function compact(svg: string): string {
  return svg.replace(/ (d|transform)="([^"]*)"/g, (_m, attr: string, value: string) => ` ${attr}="${value.replace(/(\d\.\d)\d+/g, "$1")}"`);
}
