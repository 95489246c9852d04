import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { RateLimitConfigError, parseDuration, type ConfigIssue } from "ratekeeper";
import {
  SCENARIOS,
  formatTable,
  parseTraffic,
  scenario,
  simulate,
  type AlgorithmChoice,
  type ScenarioName,
  type SimulationResult,
  type Traffic,
} from "ratekeeper/simulate";
import { writeReport } from "../simulate/report.js";
import { str, type Command, type Values } from "./command.js";

/**
 * `ratekeeper simulate`: the flags, turned into traffic and simulator options; prints a table
 * per traffic and, with `--out DIR`, writes the report (index.html, one SVG per chart, results.json).
 */

/** Flags, as node:util parseArgs takes them. */
export const SIMULATE_FLAGS = {
  scenario: { type: "string", short: "s" },
  traffic: { type: "string", short: "t" },
  format: { type: "string" },
  "time-unit": { type: "string" },
  limit: { type: "string", short: "l" },
  window: { type: "string", short: "w" },
  algorithms: { type: "string", short: "a" },
  seed: { type: "string" },
  duration: { type: "string" },
  requests: { type: "string" },
  keys: { type: "string" },
  key: { type: "string" },
  bins: { type: "string" },
  out: { type: "string", short: "o" },
} as const;

/** One line of help per flag: `ARG  text`. */
export const SIMULATE_FLAG_HELP: Readonly<Record<keyof typeof SIMULATE_FLAGS, string>> = {
  scenario: `NAMES  built-in traffic, comma-separated: ${SCENARIOS.join(", ")} [default: all]`,
  traffic: "FILE  your own traffic instead: a CSV (time,key[,cost]) or an nginx/Apache access log",
  format: "FMT  how to read --traffic: auto, csv or access-log [default auto]",
  "time-unit": "UNIT  CSV times that are plain numbers: auto (>= 1e11 ms, else seconds), ms or s [default auto]",
  limit: "N  requests (cost units) per window, for every algorithm [default 100]",
  window: "DUR  the window, for every algorithm: 500ms, 10s, 1m, 1h [default 1m]",
  algorithms:
    "LIST  algorithms with options, comma-separated, e.g. fixed-window,sliding-window:buckets=10,gcra:burst=9 [default: each algorithm, leaky-bucket as a queue]",
  seed: "N  seed of the built-in traffic (same seed, same requests) [default 1]",
  duration: "DUR  how long the built-in traffic lasts [default 20 windows]",
  requests: "N  about this many built-in requests (sets the duration), e.g. 1000000",
  keys: "N  keys of the heavy-hitter scenario [default 100]",
  key: "KEY  the key whose state is charted [default: the busiest]",
  bins: "N  time buckets in the charts [default 200]",
  out: "DIR  write index.html, one SVG per chart and results.json there",
};

/**
 * Runs `ratekeeper simulate` with parsed flags.
 * @returns the exit code: 0, or 2 for bad flags or bad traffic (the message names the flag, or the line and field)
 * @example await runSimulate({ scenario: "boundary", limit: "10", window: "1s", out: "report" })
 */
export async function runSimulate(values: Values, out: { stdout: (s: string) => void; stderr: (s: string) => void }): Promise<number> {
  try {
    const plan = await planOf(values);
    const t0 = performance.now();
    const results: SimulationResult[] = [];
    let requests = 0;
    for (const traffic of plan.traffics) {
      // 100 sampled denials per algorithm are plenty for a scatter plot (every denial is still checked).
      results.push(
        simulate({
          limit: plan.limit,
          window: plan.windowMs,
          traffic,
          algorithms: plan.algorithms,
          bins: plan.bins,
          stateKey: plan.stateKey,
          retrySamples: 100,
        }),
      );
      requests += traffic.timesMs.length;
    }
    const ms = performance.now() - t0;
    for (const r of results) out.stdout(`${formatTable(r)}\n\n`);
    const algs = results[0]?.algorithms.length ?? 0;
    out.stderr(`simulated ${requests} requests x ${algs} algorithms in ${(ms / 1000).toFixed(2)} s\n`);
    const dir = str(values.out);
    if (dir !== undefined) {
      const written = await writeReport(dir, results, commandLine(values));
      out.stderr(`wrote ${written.index}, ${written.svgs.length} SVG charts and ${written.json}\n`);
    }
    return 0;
  } catch (e) {
    if (!(e instanceof RateLimitConfigError)) throw e;
    out.stderr(`ratekeeper simulate: ${e.message}\n`);
    return 2;
  }
}

interface Plan {
  traffics: Traffic[];
  limit: number;
  windowMs: number;
  algorithms: AlgorithmChoice[] | undefined;
  bins: number | undefined;
  stateKey: string | undefined;
}

async function planOf(v: Values): Promise<Plan> {
  const issues: ConfigIssue[] = [];
  const int = (name: string, dflt?: number): number | undefined => {
    const text = str(v[name]);
    if (text === undefined) return dflt;
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
      issues.push({ path: `--${name}`, message: `must be a whole number (got ${JSON.stringify(text)})` });
    return n;
  };
  const dur = (name: string, dflt?: string): number | undefined => {
    const text = str(v[name]) ?? dflt;
    if (text === undefined) return undefined;
    try {
      return parseDuration(/^\d+$/.test(text) ? Number(text) : text, `--${name}`);
    } catch (e) {
      issues.push(...(e as RateLimitConfigError).issues);
      return undefined;
    }
  };
  const limit = int("limit", 100) as number;
  const windowMs = dur("window", "1m") ?? 60_000;
  const seed = int("seed");
  const durationMs = dur("duration");
  const requests = int("requests");
  const keys = int("keys");
  const bins = int("bins");
  const algorithms = str(v.algorithms) === undefined ? undefined : parseAlgorithms(str(v.algorithms) as string, issues);
  const file = str(v.traffic);
  const names = str(v.scenario);
  if (file !== undefined && names !== undefined) issues.push({ path: "--traffic", message: "give --traffic or --scenario, not both" });
  const chosen = (names ?? SCENARIOS.join(",")).split(",").map((s) => s.trim());
  for (const n of chosen)
    if (!(SCENARIOS as readonly string[]).includes(n))
      issues.push({ path: "--scenario", message: `must be one or more of ${SCENARIOS.join(", ")} (got ${JSON.stringify(n)})` });
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  let traffics: Traffic[];
  if (file !== undefined) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (e) {
      throw new RateLimitConfigError([{ path: "--traffic", message: `cannot read ${JSON.stringify(file)}: ${(e as Error).message}` }]);
    }
    const format = str(v.format) as "auto" | "csv" | "access-log" | undefined;
    const timeUnit = str(v["time-unit"]) as "auto" | "ms" | "s" | undefined;
    traffics = [parseTraffic(text, { name: basename(file), format, timeUnit })];
  } else {
    traffics = chosen.map((n) => scenario(n as ScenarioName, { limit, windowMs, seed, durationMs, requests, keys }));
  }
  return { traffics, limit, windowMs, algorithms, bins, stateKey: str(v.key) };
}

/**
 * `fixed-window,sliding-window:buckets=10:weighted=false,gcra:burst=9` into algorithm choices.
 * Option values that read as numbers or booleans become those; the rest stay strings (the
 * library validates each and names the bad one).
 */
export function parseAlgorithms(text: string, issues: ConfigIssue[]): AlgorithmChoice[] {
  return text.split(",").map((item, i) => {
    const [name, ...opts] = item.trim().split(":");
    const choice: Record<string, unknown> = { algorithm: name };
    for (const o of opts) {
      const eq = o.indexOf("=");
      if (eq <= 0) {
        issues.push({
          path: `--algorithms`,
          message: `${JSON.stringify(o)} in item ${i + 1} (${JSON.stringify(item)}) is not option=value`,
        });
        continue;
      }
      const raw = o.slice(eq + 1);
      choice[o.slice(0, eq)] = raw === "true" ? true : raw === "false" ? false : /^\d+$/.test(raw) ? Number(raw) : raw;
    }
    return choice as AlgorithmChoice;
  });
}

/** The command line that reproduces a run, for the report. */
function commandLine(v: Values): string {
  const parts = ["ratekeeper simulate"];
  for (const [k, val] of Object.entries(v))
    if (typeof val === "string") parts.push(`--${k} ${/[\s"']/.test(val) ? JSON.stringify(val) : val}`);
  return parts.join(" ");
}

/** `ratekeeper simulate`. */
export const SIMULATE_COMMAND: Command = {
  words: ["simulate"],
  args: "",
  summary: "replay traffic through every algorithm: a table each, and with --out an HTML report with SVG charts",
  flags: SIMULATE_FLAGS,
  flagHelp: SIMULATE_FLAG_HELP,
  run: (values) => runSimulate(values, { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) }),
};
