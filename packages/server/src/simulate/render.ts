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
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
