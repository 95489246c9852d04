import { writeFile } from "node:fs/promises";
import { makeFolder } from "../make-folder.js";
import { join } from "node:path";
import { formatMs, type SimulationResult } from "ratekeeper/simulate";
import { chartViews } from "./charts.js";
import { renderSvg } from "./render.js";

/** The files a report wrote. */
export interface WrittenReport {
  readonly index: string;
  readonly svgs: readonly string[];
  readonly json: string;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/**
 * Writes a simulation report into `dir`: `index.html` (a summary table per traffic and the
 * charts), one SVG per chart (`admitted.svg`, `worst-window.svg`, `retry-after.svg`,
 * `state.svg`; prefixed with the traffic's name when there are several), and `results.json`
 * (every number, for scripts). Self-contained: the page loads only these files, so it opens
 * from disk with no network.
 * @param command the command line that made it, shown in the report so it can be run again
 */
export async function writeReport(dir: string, results: readonly SimulationResult[], command: string): Promise<WrittenReport> {
  makeFolder(dir);
  const svgs: string[] = [];
  const sections: string[] = [];
  for (const r of results) {
    const prefix = results.length > 1 ? `${fileSafe(r.traffic.name)}-` : "";
    const figures: string[] = [];
    for (const view of chartViews(r)) {
      const file = `${prefix}${view.name}.svg`;
      await writeFile(join(dir, file), await renderSvg(view.spec, view.title));
      svgs.push(file);
      figures.push(
        `<figure id="${esc(prefix + view.name)}"><img src="${esc(file)}" alt="${esc(`${view.title}: ${r.traffic.name}`)}"><figcaption>${esc(view.caption)}</figcaption></figure>`,
      );
    }
    sections.push(section(r, figures));
  }
  const index = join(dir, "index.html");
  await writeFile(index, page(results, sections, command));
  const json = join(dir, "results.json");
  await writeFile(json, `${JSON.stringify(results, null, 1)}\n`);
  return { index, svgs, json };
}

function fileSafe(name: string): string {
  return name.replace(/[^A-Za-z0-9_.-]+/g, "_");
}

function section(r: SimulationResult, figures: string[]): string {
  const unit = r.traffic.weighted ? "units" : "requests";
  const many = r.traffic.keys > 1;
  const share = (n: number, of: number) => (n === of ? "all" : `${n} of ${of}`);
  const rows = r.algorithms.map((a) => {
    const w = a.retry;
    const over = a.worstInWindow.units / r.limit;
    const cells = [
      `${a.admitted} (${((100 * a.admitted) / (a.admitted + a.denied)).toFixed(1)}%)`,
      String(a.denied),
      String(a.worstInWindow.units),
      `${over.toFixed(2)}x`,
      `${many ? `${a.worstInWindow.key} ` : ""}${formatMs(a.worstInWindow.atMs)}`,
      w.denials ? share(w.truthful, w.denials) : "-",
      w.denials ? share(w.exact, w.denials) : "-",
      w.denials ? formatMs(w.medianGivenMs) : "-",
      a.delays.delayed ? formatMs(a.delays.maxMs) : "-",
      String(a.bytesPerKey),
    ];
    return `<tr${over > 1 ? ' class="over"' : ""}><th scope="row">${esc(a.label)}</th>${cells.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`;
  });
  const heads = [
    "algorithm",
    "admitted",
    "denied",
    "worst window",
    "x limit",
    many ? "key, at" : "at",
    "retryAfter enough",
    "exact",
    "median retryAfter",
    "max delay",
    "bytes/key",
  ];
  return `<section id="${esc(fileSafe(r.traffic.name))}">
<h2>${esc(r.traffic.name)}</h2>
<p class="what">${esc(r.traffic.description)}. ${r.traffic.requests} requests from ${r.traffic.keys} key${r.traffic.keys === 1 ? "" : "s"} over ${esc(formatMs(r.traffic.endMs - r.traffic.startMs))}; every algorithm allows <b>${r.limit} ${unit} per ${esc(formatMs(r.windowMs))}</b>.</p>
<table>
<thead><tr>${heads.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
<p class="note">Worst window: the most ${unit} one key had admitted in any rolling window of ${esc(formatMs(r.windowMs))}; rows above the limit are marked. retryAfter enough: denials whose retryAfterMs was long enough (retrying then is admitted); exact: and one millisecond less was not.</p>
${figures.join("\n")}
</section>`;
}

function page(results: readonly SimulationResult[], sections: string[], command: string): string {
  const nav =
    results.length > 1
      ? `<nav>${results.map((r) => `<a href="#${esc(fileSafe(r.traffic.name))}">${esc(r.traffic.name)}</a>`).join(" · ")}</nav>`
      : "";
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ratekeeper simulate: ${esc(results.map((r) => r.traffic.name).join(", "))}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1000px; padding: 0 16px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 40px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
code { background: #f4f4f4; padding: 1px 4px; border-radius: 3px; }
table { border-collapse: collapse; font-size: 13px; margin: 12px 0; }
th, td { padding: 4px 6px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th[scope=row], thead th:first-child { text-align: left; }
tr.over td:nth-child(5) { color: #c0392b; font-weight: 600; }
figure { margin: 24px 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .note, .what { color: #555; max-width: 900px; }
</style>
</head>
<body>
<h1>Rate limiting algorithms on the same traffic</h1>
<p>Made by <code>${esc(command)}</code>: each algorithm sees the same requests with the same limit and window, on a virtual clock, one state per key, decided by ratekeeper's own algorithm code.</p>
${nav}
${sections.join("\n")}
</body>
</html>
`;
}
