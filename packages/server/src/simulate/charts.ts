import { formatMs, type SimulationResult } from "ratekeeper/simulate";

/**
 * The simulator's charts as Vega-Lite specifications (plain data; render.ts draws them). One
 * view per file: what each algorithm admitted over time, the worst rolling window against the
 * limit, retryAfter given against the real wait, and the followed key's state over time.
 * Every chart colours an algorithm the same way.
 */

/** A Vega-Lite spec: plain JSON (the schema is large; vega-lite validates it when compiling). */
export type VegaLiteSpec = Record<string, unknown>;

/** One chart of the report. */
export interface ChartView {
  /** File name without `.svg`. */
  readonly name: string;
  readonly title: string;
  /** What the chart shows and how to read it, for the report. */
  readonly caption: string;
  readonly spec: VegaLiteSpec;
}

const WIDTH = 640;

/** The time unit for the x axis: the largest of ms, s, min, h that keeps the span above 2 units. */
function timeUnit(spanMs: number): { label: string; ms: number } {
  if (spanMs >= 2 * 3_600_000) return { label: "h", ms: 3_600_000 };
  if (spanMs >= 2 * 60_000) return { label: "min", ms: 60_000 };
  if (spanMs >= 2_000) return { label: "s", ms: 1000 };
  return { label: "ms", ms: 1 };
}

/** Units in a bucket as a rate per window (comparable with the limit), rounded to what a chart can show. */
const perWindow = (units: number, binMs: number, windowMs: number) => Math.round(((units * windowMs) / binMs) * 100) / 100;

/** The four views of a simulation. */
export function chartViews(r: SimulationResult): ChartView[] {
  const tu = timeUnit(r.traffic.endMs - r.traffic.startMs);
  const t = (bin: number) => Math.round(((bin + 0.5) * r.binMs * 1000) / tu.ms) / 1000;
  const labels = r.algorithms.map((a) => a.label);
  const color = { field: "algorithm", type: "nominal", scale: { domain: labels, scheme: "tableau10" }, legend: null };
  const xTime = { field: "t", type: "quantitative", title: `time since start (${tu.label})`, scale: { nice: false } };
  const unit = r.traffic.weighted ? "units" : "requests";
  // Row facets labelled above each panel, so that long labels do not push the plots aside.
  const facet = {
    field: "algorithm",
    type: "nominal",
    title: null,
    sort: labels,
    header: { labelOrient: "top", labelAngle: 0, labelAlign: "left", labelAnchor: "start", labelFontSize: 12, labelPadding: 2 },
  };
  const ctx: Charting = { r, t, xTime, color, facet, unit };
  return [admittedView(ctx), worstView(ctx), retryView(r, color), stateView(ctx)];
}

type Encoding = Record<string, unknown>;

/** What the views over time share: the result, the axes and encodings every chart uses alike. */
interface Charting {
  readonly r: SimulationResult;
  /** The x value (in the time unit) of the middle of a time bucket. */
  readonly t: (bin: number) => number;
  /** The x axis: time since start. */
  readonly xTime: Encoding;
  /** One colour per algorithm, the same in every chart. */
  readonly color: Encoding;
  /** One row per algorithm, labelled above it. */
  readonly facet: Encoding;
  /** What is counted: "requests", or "units" when requests have costs. */
  readonly unit: string;
}

function admittedView({ r, t, xTime, color, facet, unit }: Charting): ChartView {
  const values: Record<string, unknown>[] = [];
  const w = formatMs(r.windowMs);
  for (const a of r.algorithms)
    for (let b = 0; b < r.bins; b++)
      values.push({
        algorithm: a.label,
        t: t(b),
        offered: perWindow(r.offered[b] as number, r.binMs, r.windowMs),
        admitted: perWindow(a.series.admitted[b] as number, r.binMs, r.windowMs),
      });
  const y = { type: "quantitative", title: `per ${w}` };
  return {
    name: "admitted",
    title: `Admitted vs offered over time (rate per ${w})`,
    caption: `Grey: ${unit} offered; colour: ${unit} admitted, counted when they proceed (a shaping leaky bucket releases them later). Both are rates per ${w} over time buckets of ${formatMs(r.binMs)}, so the dashed line is the limit (${r.limit} per ${w}). Each panel is one algorithm on the same traffic.`,
    spec: {
      data: { values },
      facet: { row: facet },
      spec: {
        width: WIDTH,
        height: 90,
        layer: [
          {
            mark: { type: "area", color: "#bbbbbb", opacity: 0.6, interpolate: "step-after" },
            encoding: { x: xTime, y: { ...y, field: "offered" } },
          },
          {
            mark: { type: "line", strokeWidth: 1.5, interpolate: "step-after" },
            encoding: { x: xTime, y: { ...y, field: "admitted" }, color },
          },
          { mark: { type: "rule", strokeDash: [4, 3], color: "#444" }, encoding: { y: { datum: r.limit } } },
        ],
      },
      resolve: { scale: { y: "shared" } },
    },
  };
}

/** The worst rolling window of each algorithm: over the whole run (bars), then over time. */
function worstView(ctx: Charting): ChartView {
  const { r, t, xTime, color, facet, unit } = ctx;
  const values: Record<string, unknown>[] = [];
  for (const a of r.algorithms)
    for (let b = 0; b < r.bins; b++) values.push({ algorithm: a.label, t: t(b), worst: a.series.worstInWindow[b] });
  const limitRule = { mark: { type: "rule", color: "#d62728", strokeDash: [5, 3], strokeWidth: 1.5 }, encoding: { y: { datum: r.limit } } };
  return {
    name: "worst-window",
    title: "Worst rolling window against the limit (over-admission)",
    caption: `The most ${unit} one key had admitted in any window of ${formatMs(r.windowMs)} ending at an admission. Above the red line (the limit, ${r.limit}) the algorithm let more through than "${r.limit} per window" read as a rolling window. Top: the worst over the whole run; below: over time.`,
    spec: {
      vconcat: [
        worstBars(ctx),
        {
          data: { values },
          facet: { row: facet },
          spec: {
            width: WIDTH,
            height: 70,
            layer: [
              {
                mark: { type: "bar", width: { band: 1 } },
                encoding: { x: { ...xTime }, y: { field: "worst", type: "quantitative", title: unit }, color },
              },
              limitRule,
            ],
          },
        },
      ],
    },
  };
}

/** The worst window of each algorithm over the whole run: one bar each, with its ratio to the limit. */
function worstBars({ r, color, unit }: Charting): VegaLiteSpec {
  const bars = r.algorithms.map((a) => ({
    algorithm: a.label,
    worst: a.worstInWindow.units,
    ratio: `${(a.worstInWindow.units / r.limit).toFixed(2)}x`,
  }));
  return {
    data: { values: bars },
    width: WIDTH,
    height: 22 * bars.length,
    layer: [
      {
        mark: { type: "bar" },
        encoding: {
          y: { field: "algorithm", type: "nominal", sort: bars.map((b) => b.algorithm), title: null, axis: { labelLimit: 320 } },
          x: { field: "worst", type: "quantitative", title: `most ${unit} in one rolling window (limit ${r.limit})` },
          color,
        },
      },
      {
        mark: { type: "text", align: "left", dx: 4 },
        encoding: {
          y: { field: "algorithm", type: "nominal", sort: bars.map((b) => b.algorithm) },
          x: { field: "worst", type: "quantitative" },
          text: { field: "ratio" },
        },
      },
      { mark: { type: "rule", color: "#d62728", strokeDash: [5, 3], strokeWidth: 1.5 }, encoding: { x: { datum: r.limit } } },
    ],
  };
}

function retryView(r: SimulationResult, color: Encoding): ChartView {
  const values: Record<string, unknown>[] = [];
  const withDenials = r.algorithms.filter((a) => a.retry.samples.length > 0);
  for (const a of withDenials) {
    let maxMs = 1;
    for (const s of a.retry.samples) {
      values.push({ algorithm: a.label, given: s.givenMs, real: s.realMs });
      maxMs = Math.max(maxMs, s.givenMs, s.realMs);
    }
    // The diagonal (given = real) of this panel, as two points drawn as a line.
    for (const ms of [0, maxMs]) values.push({ algorithm: a.label, diagonal: ms });
  }
  const scale = { zero: true, nice: true };
  const allExact = r.algorithms.every((a) => a.retry.exact === a.retry.denials);
  const none = r.algorithms.filter((a) => a.retry.denials === 0).map((a) => a.label);
  return {
    name: "retry-after",
    title: "retryAfter given vs the real wait",
    caption: `One panel per algorithm that denied; each dot is a denial (a sample spread over the run). Across: the shortest wait after which the same request is really admitted (found by peeking at later times); up: the retryAfterMs the decision gave (both in ms; each panel has its own scale). On the dashed diagonal: exact. Above it the client waits longer than it needs; below it the client retries too early and is denied again.${allExact ? " Here every denial was exact." : ""}${none.length ? ` No denials: ${none.join(", ")}.` : ""}`,
    spec: {
      data: { values },
      facet: { field: "algorithm", type: "nominal", title: null, sort: withDenials.map((a) => a.label), header: { labelFontSize: 12 } },
      columns: 3,
      resolve: { scale: { x: "independent", y: "independent" } },
      spec: {
        width: 190,
        height: 190,
        layer: [
          {
            transform: [{ filter: "datum.diagonal != null" }],
            mark: { type: "line", color: "#999", strokeDash: [4, 3] },
            encoding: { x: { field: "diagonal", type: "quantitative", scale }, y: { field: "diagonal", type: "quantitative", scale } },
          },
          {
            transform: [{ filter: "datum.diagonal == null" }],
            mark: { type: "point", filled: true, opacity: 0.5, size: 18 },
            encoding: {
              x: { field: "real", type: "quantitative", title: "real shortest wait (ms)", scale },
              y: { field: "given", type: "quantitative", title: "retryAfter given (ms)", scale },
              color,
            },
          },
        ],
      },
    },
  };
}

function stateView({ r, t, xTime, color, facet }: Charting): ChartView {
  const values: Record<string, unknown>[] = [];
  const title = (a: SimulationResult["algorithms"][number]) => `${a.label}: ${a.stateLabel}`;
  for (const a of r.algorithms)
    for (let b = 0; b < r.bins; b++)
      values.push({
        algorithm: title(a),
        label: a.label,
        t: t(b),
        end: a.series.state[b],
        lo: a.series.stateMin[b],
        hi: a.series.stateMax[b],
      });
  const y = { type: "quantitative", title: null };
  return {
    name: "state",
    title: `State over time (key ${JSON.stringify(r.stateKey)})`,
    caption: `The state of the key ${JSON.stringify(r.stateKey)} in each algorithm's own terms: the count of a fixed or sliding window, the entries of the log inside the window, the tokens in a token bucket, the level of a leaky bucket, the cells in use of GCRA. Line: at the end of each time bucket of ${formatMs(r.binMs)}; band: the lowest and highest it was within the bucket (right after each of the key's requests).`,
    spec: {
      data: { values },
      facet: { row: { ...facet, sort: r.algorithms.map(title) } },
      spec: {
        width: WIDTH,
        height: 60,
        layer: [
          {
            mark: { type: "area", opacity: 0.25, interpolate: "step-after" },
            encoding: { x: xTime, y: { ...y, field: "lo" }, y2: { field: "hi" }, color: { ...color, field: "label" } },
          },
          {
            mark: { type: "line", strokeWidth: 1.5, interpolate: "step-after" },
            encoding: { x: xTime, y: { ...y, field: "end" }, color: { ...color, field: "label" } },
          },
        ],
      },
      resolve: { scale: { y: "independent" } },
    },
  };
}
