import { parseDuration, type Duration } from "../core/duration.js";
import { Evaluator } from "../core/evaluate.js";
import { resolveLimit, type LimitSpec, type ResolvedLimit } from "../core/options.js";
import { algorithmLabel, type AlgorithmChoice } from "./algorithms.js";

/**
 * The worst case of an algorithm, measured: the most cost units one key can get admitted in a
 * rolling window `(t - window, t]` against a client that attacks on purpose.
 *
 * "100 per minute" read as a rolling window means never more than 100 in any 60 s. Only the
 * sliding log keeps that; every other algorithm trades it for less memory or for bursts. The
 * figures here come from running the algorithm's own decision code (the memory store's), not
 * from a formula, against every attack of this family:
 *
 * 1. a fresh key sends `k` requests at once at time `a` (as many as are admitted, up to `k`);
 * 2. it is silent until `b` (`b >= a`), then floods: a request at every millisecond.
 *
 * The flood jumps straight to `t + retryAfterMs` after a denial, which is the same as asking at
 * every millisecond because `retryAfterMs` is tight (1 ms earlier is denied, a property test
 * checks it). `k` runs over 1..capacity, `a` over the alignment offsets that matter (the first
 * and last two milliseconds of a sub-window, and a grid), and `b` over every millisecond of
 * the next window and a sub-window. That family holds each algorithm's textbook worst case:
 * the fixed window's double burst at a boundary, the sliding tail's burst at the end of a
 * window counted at nearly 0 a window later, a full bucket plus its refill.
 *
 * Pure and deterministic (a virtual clock); `scripts/worst-case.js` prints the table of
 * docs/algorithms.md, and a test checks that the docs say what this measures.
 */
export interface WorstCase {
  /** The algorithm and its non-default options, e.g. `sliding-window buckets=10`. */
  readonly label: string;
  readonly limit: number;
  readonly windowMs: number;
  /** The most units admitted in any `(t - window, t]`. */
  readonly units: number;
  /** `units / limit`. */
  readonly ratio: number;
  /** The attack that got there: `k` at `a`, flood from `b` (ms from a window boundary), and the shortest span holding `units`. */
  readonly attack: { readonly k: number; readonly atMs: number; readonly floodFromMs: number; readonly spanMs: number };
  /** Shaping (leaky bucket `mode: "shape"`): the most that proceed (after their delay) in any rolling window. */
  readonly proceeding?: number;
}

/** Options of {@link worstCase}. */
export interface WorstCaseOptions {
  limit: number;
  window: Duration;
  /** The algorithm with its options (no limit or window). */
  algorithm: AlgorithmChoice;
  /** Step of the grid of start offsets `a`, besides the sub-window edges. @default window / 20 */
  startStepMs?: number;
}

/**
 * Measures the worst rolling-window over-admission of one algorithm (see {@link WorstCase}).
 * @example worstCase({ limit: 5, window: "10s", algorithm: { algorithm: "sliding-window" } }).units // 10
 */
export function worstCase(options: WorstCaseOptions): WorstCase {
  const windowMs = parseDuration(options.window, "window");
  const spec = { ...options.algorithm, limit: options.limit, window: windowMs } as LimitSpec;
  const lim = resolveLimit(spec);
  const ev = new Evaluator([lim]);
  const sub = Math.floor(windowMs / lim.buckets);
  let best: WorstCase | undefined;
  const step = options.startStepMs ?? Math.max(1, Math.floor(windowMs / 20));
  const ks = [...new Set([1, 2, lim.capacity - 1, lim.capacity])].filter((k) => k >= 1 && k <= lim.capacity);
  for (const a of startOffsets(windowMs, sub, step)) {
    for (const k of ks) {
      for (const b of floodStarts(a, windowMs, sub, step)) {
        const run = attack(ev, lim, a, k, b);
        if (best === undefined || run.units > best.units || (run.units === best.units && run.spanMs < best.attack.spanMs)) {
          best = {
            label: algorithmLabel(options.algorithm),
            limit: lim.limit,
            windowMs,
            units: run.units,
            ratio: run.units / lim.limit,
            attack: { k, atMs: a, floodFromMs: b, spanMs: run.spanMs },
            ...(lim.shape ? { proceeding: run.proceeding } : {}),
          };
        } else if (lim.shape && best.proceeding !== undefined && run.proceeding > best.proceeding) {
          best = { ...best, proceeding: run.proceeding };
        }
      }
    }
  }
  return best as WorstCase;
}

/** Start offsets from a window boundary: the first and last two ms of every sub-window, and a grid. */
function startOffsets(windowMs: number, sub: number, step: number): number[] {
  const set = new Set<number>();
  for (let s = 0; s < windowMs; s += sub) for (const d of [0, 1, sub - 2, sub - 1]) if (d >= 0 && d < sub) set.add(s + d);
  for (let t = 0; t < windowMs; t += step) set.add(t);
  return [...set].sort((x, y) => x - y);
}

/**
 * Flood starts from `a` on: the first and last two ms of each sub-window, counted both from the
 * clock's boundaries and from `a` itself (a window that opens at the key's first request), and a
 * grid, up to a window and a sub-window after `a`.
 */
function floodStarts(a: number, windowMs: number, sub: number, step: number): number[] {
  const set = new Set<number>([a]);
  const last = a + windowMs + sub;
  for (const base of [0, a]) {
    for (let e = base; e <= last + sub; e += sub) for (const d of [-2, -1, 0, 1]) if (e + d >= a && e + d <= last) set.add(e + d);
  }
  for (let t = a; t <= last; t += Math.max(1, Math.floor(step / 5))) set.add(t);
  return [...set].sort((x, y) => x - y);
}

/** One attack: `k` at `a`, then a flood from `b` for two windows. Times are offsets from an aligned boundary. */
function attack(ev: Evaluator, lim: ResolvedLimit, a: number, k: number, b: number): { units: number; spanMs: number; proceeding: number } {
  // A clock-aligned origin far from 0, so `align: "clock"` windows start at offset 0.
  const origin = lim.windowMs * 1_000_000;
  const st = ev.init1();
  const admitted: number[] = [];
  const proceed: number[] = [];
  for (let i = 0; i < k; i++) {
    const d = ev.consume1(st, origin + a, 1);
    if (!d.allowed) break;
    admitted.push(a);
    proceed.push(a + d.delayMs);
  }
  const end = b + 2 * lim.windowMs;
  let t = b;
  while (t <= end) {
    const d = ev.consume1(st, origin + t, 1);
    if (d.allowed) {
      admitted.push(t);
      proceed.push(t + d.delayMs);
    } else t += Math.max(1, d.retryAfterMs);
  }
  const w = densest(admitted, lim.windowMs);
  return {
    units: w.units,
    spanMs: w.spanMs,
    proceeding: densest(
      proceed.sort((x, y) => x - y),
      lim.windowMs,
    ).units,
  };
}

/** The most times (sorted) in any `(t - windowMs, t]`, and the shortest span from first to last of such a set, in ms, both ends counted. */
function densest(times: readonly number[], windowMs: number): { units: number; spanMs: number } {
  let units = 0;
  let spanMs = 0;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while ((times[lo] as number) <= (times[hi] as number) - windowMs) lo++;
    const n = hi - lo + 1;
    const span = (times[hi] as number) - (times[lo] as number) + 1;
    if (n > units || (n === units && span < spanMs)) {
      units = n;
      spanMs = span;
    }
  }
  return { units, spanMs };
}

/** The algorithms and options whose worst case docs/algorithms.md states. */
export const WORST_CASE_ALGORITHMS: readonly AlgorithmChoice[] = [
  { algorithm: "fixed-window" },
  { algorithm: "fixed-window", align: "first-request" },
  { algorithm: "sliding-log" },
  { algorithm: "sliding-window" },
  { algorithm: "sliding-window", buckets: 10 },
  { algorithm: "sliding-window", buckets: 10, weighted: false },
  { algorithm: "token-bucket" },
  { algorithm: "leaky-bucket" },
  { algorithm: "leaky-bucket", mode: "shape" },
  { algorithm: "gcra" },
  { algorithm: "gcra", burst: 4 },
];

/**
 * A Markdown table of worst cases measured with one limit and window.
 * @example console.log(formatWorstCases(WORST_CASE_ALGORITHMS.map((algorithm) => worstCase({ limit: 5, window: "10s", algorithm }))));
 */
export function formatWorstCases(results: readonly WorstCase[]): string {
  const first = results[0];
  if (first === undefined) return "";
  const w = `${first.windowMs / 1000} s`;
  const rows = [
    `| algorithm (${first.limit} per ${w}) | most admitted in a rolling ${w} | x limit | packed into | proceeding (shaping) |`,
    "|---|---:|---:|---:|---:|",
  ];
  for (const r of results) {
    const proceeding = r.proceeding === undefined ? "" : String(r.proceeding);
    rows.push(`| ${r.label} | ${r.units} | ${+r.ratio.toFixed(2)} | ${r.attack.spanMs} ms | ${proceeding} |`);
  }
  return rows.join("\n");
}
