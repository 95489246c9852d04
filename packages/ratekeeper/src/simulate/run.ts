import { parseDuration, type Duration } from "../core/duration.js";
import { collectIssues, describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import { resolveLimit, type LimitSpec, type ResolvedLimit } from "../core/options.js";
import { DEFAULT_ALGORITHMS, type AlgorithmChoice } from "./algorithms.js";
import { binOf, replay, type Context } from "./replay.js";
import type { RetrySummary } from "./retry.js";
import type { Traffic } from "./traffic.js";

/** Options of {@link simulate}. */
export interface SimulateOptions {
  /** Cost units per window, the same for every algorithm. */
  limit: number;
  /** The window, the same for every algorithm: milliseconds or `"10s"`, `"1m"`, ... */
  window: Duration;
  /** The requests: a built-in {@link scenario} or your own (see `parseTraffic`). */
  traffic: Traffic;
  /** The algorithms, with their options. @default DEFAULT_ALGORITHMS (each algorithm once) */
  algorithms?: readonly AlgorithmChoice[] | undefined;
  /** Time buckets of the per-time series (the charts' resolution). @default 200 */
  bins?: number | undefined;
  /** The key whose state is followed over time. @default the key with the most requests */
  stateKey?: string | undefined;
  /** How many denials to keep as samples of `retryAfterMs` (every denial is checked; these are for charts). @default 1000 */
  retrySamples?: number | undefined;
}

/** Per time bucket, for one algorithm. Counts are cost units (requests, when every request costs 1). */
export interface AlgorithmSeries {
  /** Units admitted, counted when they proceed (after `delayMs`, when shaping). */
  readonly admitted: readonly number[];
  /** The most units any one key had admitted in the window ending at an admission in this bucket (0 when none). */
  readonly worstInWindow: readonly number[];
  /** The followed key's state at the end of the bucket, in the algorithm's own terms ({@link AlgorithmResult.stateLabel}). */
  readonly state: readonly number[];
  /** The lowest and highest the followed key's state was within the bucket (right after its requests, and at the bucket's end). */
  readonly stateMin: readonly number[];
  readonly stateMax: readonly number[];
}

/** How one algorithm handled the traffic. */
export interface AlgorithmResult {
  /** The algorithm and its non-default options, e.g. `gcra burst=9`. */
  readonly label: string;
  /** The full limit spec simulated. */
  readonly spec: LimitSpec;
  /** Requests admitted and denied. */
  readonly admitted: number;
  readonly denied: number;
  /**
   * The most cost units one key had admitted in any window `(t - window, t]`: more than `limit`
   * means the algorithm admitted more than "limit per window" read as a rolling window.
   */
  readonly worstInWindow: { readonly units: number; readonly atMs: number; readonly key: string };
  /** What {@link AlgorithmSeries.state} measures, e.g. `tokens in the bucket`. */
  readonly stateLabel: string;
  /** Leaky bucket as a queue: requests held before proceeding, and for how long. */
  readonly delays: { readonly delayed: number; readonly meanMs: number; readonly maxMs: number };
  /** Bytes of the limit state's numbers per key, 8 each (not the memory store's whole cost per key, which adds the key and its entry). */
  readonly bytesPerKey: number;
  readonly retry: RetrySummary;
  readonly series: AlgorithmSeries;
}

/** What {@link simulate} returns: deterministic for the same options. */
export interface SimulationResult {
  readonly limit: number;
  readonly windowMs: number;
  readonly traffic: {
    readonly name: string;
    readonly description: string;
    readonly requests: number;
    readonly keys: number;
    readonly startMs: number;
    readonly endMs: number;
    /** Whether some request costs more than 1 (then counts are cost units). */
    readonly weighted: boolean;
  };
  /** Width of one time bucket (ms), and how many there are. */
  readonly binMs: number;
  readonly bins: number;
  /** Units offered per time bucket, counted at arrival. */
  readonly offered: readonly number[];
  /** The key whose state is in each algorithm's `series.state`. */
  readonly stateKey: string;
  readonly algorithms: readonly AlgorithmResult[];
}

/**
 * Replays `traffic` through each algorithm with the same limit and window, on the traffic's own
 * (virtual) clock, and measures what each admitted: over time, in the worst rolling window, how
 * truthful its `retryAfterMs` was, and its state over time. Runs the library's own algorithm code
 * (the memory store's), one state per key, with no store and no timers: about a million
 * requests per algorithm per second.
 * @throws RateLimitConfigError naming every bad option
 * @example
 * import { simulate, scenario } from "ratekeeper/simulate";
 * const result = simulate({ limit: 100, window: "1m", traffic: scenario("boundary", { limit: 100, windowMs: 60_000 }) });
 * for (const a of result.algorithms) console.log(a.label, a.worstInWindow.units);
 */
export function simulate(options: SimulateOptions): SimulationResult {
  const { limits, specs, windowMs, bins: wantBins, stateKey, retrySamples } = checkOptions(options);
  const traffic = options.traffic;
  const span = Math.max(1, traffic.endMs - traffic.startMs);
  const binMs = Math.max(1, Math.ceil(span / wantBins));
  const bins = Math.ceil(span / binMs);
  const ctx: Context = { traffic, startMs: traffic.startMs, binMs, bins, stateKey, retrySamples };
  const offered = new Float64Array(bins);
  const { timesMs, costs } = traffic;
  for (let i = 0; i < timesMs.length; i++) {
    const b = binOf(ctx, timesMs[i] as number);
    offered[b] = (offered[b] as number) + (costs ? (costs[i] as number) : 1);
  }
  return {
    limit: options.limit,
    windowMs,
    traffic: {
      name: traffic.name,
      description: traffic.description,
      requests: timesMs.length,
      keys: traffic.keys.length,
      startMs: traffic.startMs,
      endMs: traffic.endMs,
      weighted: costs !== undefined && costs.some((c) => c !== 1),
    },
    binMs,
    bins,
    offered: Array.from(offered),
    stateKey: traffic.keys[stateKey] as string,
    algorithms: limits.map((lim, i) => replay(lim, specs[i] as LimitSpec, ctx)),
  };
}

interface Checked {
  limits: ResolvedLimit[];
  specs: LimitSpec[];
  windowMs: number;
  bins: number;
  stateKey: number;
  retrySamples: number;
}

/** Validates the options, collecting every problem; resolves each algorithm with the common limit and window. */
function checkOptions(o: SimulateOptions): Checked {
  const issues: ConfigIssue[] = [];
  if (typeof o !== "object" || o === null) throw new RateLimitConfigError([{ path: "options", message: "must be an object" }]);
  const t = o.traffic as Traffic | undefined;
  if (typeof t !== "object" || t === null || !(t.timesMs instanceof Float64Array) || !(t.keyIds instanceof Uint32Array)) {
    issues.push({ path: "traffic", message: "must be a Traffic (from scenario(), parseTraffic() or a TrafficBuilder)" });
  } else if (t.timesMs.length === 0) issues.push({ path: "traffic", message: "has no requests" });
  const windowMs = collectIssues(issues, () => parseDuration(o.window, "window")) ?? 0;
  const choices = o.algorithms ?? DEFAULT_ALGORITHMS;
  if (!Array.isArray(choices) || choices.length === 0)
    issues.push({ path: "algorithms", message: `must be a non-empty array (got ${describeValue(choices)})` });
  const limits: ResolvedLimit[] = [];
  const specs: LimitSpec[] = [];
  if (Array.isArray(choices)) {
    (choices as readonly AlgorithmChoice[]).forEach((c, i) => {
      const spec = { ...c, limit: o.limit, window: o.window } as LimitSpec;
      // limit and window are common to every algorithm: report them once, without the index.
      const once = (issue: ConfigIssue): ConfigIssue | undefined => {
        const common = /\.(limit|window)$/.exec(issue.path);
        const path = common ? (common[1] as string) : issue.path;
        return issues.some((x) => x.path === path && x.message === issue.message) ? undefined : { path, message: issue.message };
      };
      const lim = collectIssues(issues, () => resolveLimit(spec, `algorithms[${i}]`), once);
      if (lim !== undefined) {
        limits.push(lim);
        specs.push(spec);
      }
    });
  }
  const whole = (v: unknown, path: string, min: number, max: number, dflt: number): number => {
    if (v === undefined) return dflt;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max) return v;
    issues.push({ path, message: `must be a whole number from ${min} to ${max} (got ${describeValue(v)})` });
    return dflt;
  };
  const bins = whole(o.bins, "bins", 1, 10_000, 200);
  const retrySamples = whole(o.retrySamples, "retrySamples", 0, 1_000_000, 1000);
  let stateKey = 0;
  if (issues.length === 0) {
    // Only reached with a valid traffic (checked above).
    const traffic = t as Traffic;
    const maxCost = traffic.costs ? traffic.costs.reduce((m, c) => (c > m ? c : m), 1) : 1;
    limits.forEach((lim, i) => {
      if (maxCost > lim.capacity)
        issues.push({
          path: `algorithms[${i}]`,
          message: `${lim.algorithm} can never admit a cost above ${lim.capacity}, and the traffic has a request of cost ${maxCost}`,
        });
    });
    if (o.stateKey !== undefined) {
      stateKey = traffic.keys.indexOf(o.stateKey);
      if (stateKey < 0) issues.push({ path: "stateKey", message: `is not a key of the traffic (got ${describeValue(o.stateKey)})` });
    } else stateKey = busiestKey(traffic);
  }
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  return { limits, specs, windowMs, bins, stateKey, retrySamples };
}

/** The key with the most requests (the first such, on a tie). */
function busiestKey(t: Traffic): number {
  const counts = new Uint32Array(t.keys.length);
  let best = 0;
  for (let i = 0; i < t.keyIds.length; i++) {
    const k = t.keyIds[i] as number;
    if (++(counts[k] as number) > (counts[best] as number) || ((counts[k] as number) === (counts[best] as number) && k < best)) best = k;
  }
  return best;
}
