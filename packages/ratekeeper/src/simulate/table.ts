import type { SimulationResult } from "./run.js";

/** A duration for people: `850ms`, `12.5s`, `3.0m`, `2.0h`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(2)}s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(2)}m`;
  return `${+(ms / 3_600_000).toFixed(2)}h`;
}

/** A share as a percentage with no more digits than it needs: `100%`, `99.9%`, `0.02%`. */
function pct(part: number, whole: number): string {
  if (whole === 0) return "-";
  const p = (100 * part) / whole;
  return `${p === 100 || p === 0 || p >= 10 ? Math.round(p) : +p.toPrecision(2)}%`;
}

/**
 * The simulation as a plain-text table for a terminal: one row per algorithm.
 * @example console.log(formatTable(simulate({ limit, window, traffic })));
 */
export function formatTable(r: SimulationResult): string {
  const unit = r.traffic.weighted ? "units" : "requests";
  const head = [
    `${r.traffic.name}: ${r.traffic.description}`,
    `${r.traffic.requests} requests, ${r.traffic.keys} key${r.traffic.keys === 1 ? "" : "s"}, over ${formatMs(r.traffic.endMs - r.traffic.startMs)}; limit ${r.limit} ${unit} per ${formatMs(r.windowMs)}`,
    "",
  ];
  const header = [
    "algorithm",
    "admitted",
    "denied",
    "worst window",
    "x limit",
    "retryAfter ok",
    "exact",
    "median wait",
    "max delay",
    "bytes/key",
  ];
  const rows = r.algorithms.map((a) => {
    const total = a.admitted + a.denied;
    const w = a.retry;
    return [
      a.label,
      `${a.admitted} (${pct(a.admitted, total)})`,
      String(a.denied),
      `${a.worstInWindow.units} at ${formatMs(a.worstInWindow.atMs)}`,
      `${(a.worstInWindow.units / r.limit).toFixed(2)}`,
      w.denials === 0 ? "-" : pct(w.truthful, w.denials),
      w.denials === 0 ? "-" : pct(w.exact, w.denials),
      w.denials === 0 ? "-" : formatMs(w.medianGivenMs),
      a.delays.delayed === 0 ? "-" : formatMs(a.delays.maxMs),
      String(a.bytesPerKey),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ");
  const notes = [
    "",
    `worst window: the most ${unit} one key had admitted in any window of ${formatMs(r.windowMs)} (a rolling window), and when;`,
    "x limit: that over the limit. retryAfter ok: denials whose retryAfterMs was enough (retrying then succeeds);",
    "exact: and 1 ms less was not. max delay: the longest a shaping leaky bucket held a request.",
  ];
  return [...head, line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line), ...notes].join("\n");
}
