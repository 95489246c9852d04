// Number formatting and plain-text / Markdown tables for bench sections.

/** 4321000 -> "4.32M", 12345 -> "12.3k". */
export function fmtRate(n) {
  if (!Number.isFinite(n)) return "n/a";
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return n.toFixed(n >= 100 ? 0 : 1);
}

/** A ratio to the baseline: "3.41x". */
export function fmtRatio(value, baseline) {
  if (!(baseline > 0) || !Number.isFinite(value)) return "n/a";
  return `${(value / baseline).toFixed(2)}x`;
}

/** A spread fraction (max - min over median) as "±x%" (half the range, rounded). */
export function fmtSpread(fraction) {
  if (!Number.isFinite(fraction)) return "";
  return `±${Math.round((fraction * 100) / 2)}%`;
}

/**
 * Prints rows as an aligned text table and returns the same table as Markdown (for the docs).
 * @param {string[]} header
 * @param {string[][]} rows
 * @param {{ align?: ("l"|"r")[] }} [opts] column alignment (default: first column left, the rest right)
 */
export function table(header, rows, opts = {}) {
  const align = opts.align ?? header.map((_, i) => (i === 0 ? "l" : "r"));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i] ?? "").length)));
  const pad = (s, i) => (align[i] === "l" ? String(s).padEnd(widths[i]) : String(s).padStart(widths[i]));
  const lines = [header.map(pad).join("  "), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map((r) => r.map(pad).join("  "))];
  const md = [
    `| ${header.join(" | ")} |`,
    `|${align.map((a) => (a === "l" ? "---" : "---:")).join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
  return { text: lines.join("\n"), markdown: md };
}

/** One line describing the machine, for the top of every section's output and docs. */
export async function machineLine() {
  const os = await import("node:os");
  const cpus = os.cpus();
  const model = cpus[0]?.model?.trim() ?? "unknown CPU";
  return `node ${process.version}, ${os.availableParallelism?.() ?? cpus.length} cores (${model}), ${os.platform()} ${os.release()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM`;
}
