/**
 * Naive reference models for the property tests (not a test file itself).
 *
 * Each model keeps every admitted request (time and cost) and recounts from scratch, in the most
 * literal reading of the algorithm's definition; none shares code or state layout with src/.
 * All arithmetic is on integers (times scaled where needed), so a model and the algorithm can be
 * compared exactly.
 *
 * Refunds: `RateLimiter.refund(key, cost)` does not say which request it refers to, so the model
 * reads it as "the newest `cost` admitted units did not happen" (last in, first out). The bounds
 * are checked on what remains.
 */
import { expect } from "vitest";
import { ALGORITHM_IMPLS } from "../src/core/algorithms/index.js";
import { newOutcome } from "../src/core/decision.js";
import { resolveLimit, type LimitSpec, type LimitState, type Outcome, type ResolvedLimit } from "../src/index.js";
import type { Op } from "./arbitraries.js";

/** One admitted request. */
export interface Req {
  t: number;
  c: number;
}

/** The requests that count: admitted, minus those refunded (newest units first). */
export class History {
  readonly reqs: Req[] = [];
  /** The newest time admitted: a refund does not take it back (the sliding log decides as at it). */
  high = Number.NEGATIVE_INFINITY;
  admit(t: number, c: number): void {
    this.reqs.push({ t, c });
    this.high = Math.max(this.high, t);
  }
  refund(cost: number): void {
    let left = cost;
    while (left > 0 && this.reqs.length > 0) {
      const last = this.reqs[this.reqs.length - 1] as Req;
      const take = Math.min(left, last.c);
      last.c -= take;
      left -= take;
      if (last.c === 0) this.reqs.pop();
    }
  }
}

/** What a model says about a request of `c` at `t`. */
export interface ModelDecision {
  allowed: boolean;
  remaining: number;
  /** Shape mode only: the wait until this request's turn (ms, rounded up). */
  delayMs: number;
}

const sum = (rs: readonly Req[]) => rs.reduce((n, r) => n + r.c, 0);

/**
 * The model decision for `lim`, given the requests that count so far (in time order) and
 * `highMs`, the newest time admitted ({@link History.high}). The runners' clocks never step back
 * (properties-clock.test.ts and sliding-log-ring.test.ts cover that), so `t >= highMs` here.
 */
export function modelDecide(
  lim: ResolvedLimit,
  reqs: readonly Req[],
  t: number,
  c: number,
  highMs = Number.NEGATIVE_INFINITY,
): ModelDecision {
  switch (lim.algorithm) {
    case "fixed-window":
      return windowed(lim.limit, fixedWindowUsed(lim, reqs, t), c);
    case "sliding-log": {
      // Exact: units admitted in (at - window, at], where `at` is the decision's time, or the
      // newest time admitted if the clock is behind it while units count (sliding-log.ts).
      const at = reqs.length > 0 ? Math.max(t, highMs) : t;
      return windowed(lim.limit, sum(reqs.filter((r) => r.t > at - lim.windowMs && r.t <= at)), c);
    }
    case "sliding-window":
      return windowed(lim.limit, slidingWindowUsed(lim, reqs, t), c);
    case "token-bucket":
    case "leaky-bucket":
    case "gcra":
      return lim.shape ? fifoQueue(lim, reqs, t, c) : reichBucket(lim, reqs, t, c);
  }
}

function windowed(limit: number, used: number, c: number): ModelDecision {
  const allowed = used + c <= limit;
  return { allowed, remaining: allowed ? limit - used - c : Math.max(0, limit - used), delayMs: 0 };
}

/** Units in the window that holds `t`: clock-aligned, or windows opened by a first request. */
function fixedWindowUsed(lim: ResolvedLimit, reqs: readonly Req[], t: number): number {
  const W = lim.windowMs;
  if (!lim.alignFirst) return sum(reqs.filter((r) => Math.floor(r.t / W) === Math.floor(t / W)));
  const windows = firstRequestWindows(W, reqs);
  const last = windows[windows.length - 1];
  return last !== undefined && t - last.start < W ? last.units : 0;
}

/** Splits the requests into first-request windows: each opens at the first request after the previous one closed. */
export function firstRequestWindows(W: number, reqs: readonly Req[]): Array<{ start: number; units: number }> {
  const out: Array<{ start: number; units: number }> = [];
  for (const r of reqs) {
    const last = out[out.length - 1];
    if (last === undefined || r.t - last.start >= W) out.push({ start: r.t, units: r.c });
    else last.units += r.c;
  }
  return out;
}

/**
 * The sliding window count at `t`: sub-windows of S = window / buckets aligned to the clock;
 * the current and the `buckets - 1` previous ones in full, plus (weighted) the one before them
 * in proportion to its part still inside the window, rounded down.
 */
function slidingWindowUsed(lim: ResolvedLimit, reqs: readonly Req[], t: number): number {
  const B = lim.buckets;
  const S = lim.windowMs / B;
  const i = Math.floor(t / S);
  const r = t - i * S;
  const inSub = (j: number) => sum(reqs.filter((q) => Math.floor(q.t / S) === j));
  let used = 0;
  for (let j = i - B + 1; j <= i; j++) used += inSub(j);
  if (lim.weighted) used += Math.floor((inSub(i - B) * (S - r)) / S);
  return used;
}

/**
 * A bucket draining `limit` per `window`, by Reich's formula for a fluid queue: the level just
 * before `t` is the largest excess of arrivals over the drain over any stretch that starts at an
 * arrival, `max(0, max_k (window * units since t_k - limit * (t - t_k)))` (in cost x window units).
 * No state carried from request to request: every decision recounts the whole history.
 */
function reichBucket(lim: ResolvedLimit, reqs: readonly Req[], t: number, c: number): ModelDecision {
  const W = lim.windowMs;
  let level = 0;
  let since = 0;
  for (let k = reqs.length - 1; k >= 0; k--) {
    const q = reqs[k] as Req;
    since += q.c;
    level = Math.max(level, W * since - lim.limit * (t - q.t));
  }
  const full = lim.capacity * W;
  const allowed = level + c * W <= full;
  return { allowed, remaining: Math.floor((full - level - (allowed ? c * W : 0)) / W), delayMs: 0 };
}

/**
 * The leaky bucket as a queue, simulated literally: requests wait in FIFO order and each takes
 * `cost * window / limit` ms of service. Times are scaled by `limit` to stay in integers. A request
 * is admitted when the work ahead of it plus its own fits in `capacity` units; it waits for the
 * work ahead of it, rounded up to whole ms.
 */
function fifoQueue(lim: ResolvedLimit, reqs: readonly Req[], t: number, c: number): ModelDecision {
  const W = lim.windowMs;
  const base = reqs[0]?.t ?? t; // times relative to the first request, so that x limit stays exact
  let finish = Number.NEGATIVE_INFINITY; // when the queue empties, x limit
  for (const q of reqs) finish = Math.max(finish, (q.t - base) * lim.limit) + q.c * W;
  const backlog = Math.max(0, finish - (t - base) * lim.limit); // work ahead, in cost x window units
  const full = lim.capacity * W;
  const allowed = backlog + c * W <= full;
  return {
    allowed,
    remaining: Math.floor((full - backlog - (allowed ? c * W : 0)) / W),
    delayMs: allowed ? Math.ceil(backlog / lim.limit) : 0,
  };
}

/**
 * The bound each algorithm promises over the requests that count, checked over every span.
 * Returns a description of the first violation, or null.
 */
export function boundViolation(lim: ResolvedLimit, reqs: readonly Req[]): string | null {
  const W = lim.windowMs;
  const L = lim.limit;
  /** Units in [from, to], both inclusive. */
  const inSpan = (from: number, to: number) => sum(reqs.filter((r) => r.t >= from && r.t <= to));
  switch (lim.algorithm) {
    case "sliding-log":
      // Never more than `limit` in any span of `window` ms.
      for (const r of reqs) if (inSpan(r.t, r.t + W - 1) > L) return `more than ${L} in [${r.t}, ${r.t + W - 1}]`;
      return null;
    case "fixed-window": {
      // At most `limit` per window, and so at most 2 x limit in any span of `window` (the double burst).
      if (lim.alignFirst) {
        for (const w of firstRequestWindows(W, reqs)) if (w.units > L) return `${w.units} in the window opened at ${w.start}`;
      } else {
        const per = new Map<number, number>();
        for (const r of reqs) per.set(Math.floor(r.t / W), (per.get(Math.floor(r.t / W)) ?? 0) + r.c);
        for (const [w, n] of per) if (n > L) return `${n} in aligned window ${w}`;
      }
      for (const r of reqs) if (inSpan(r.t, r.t + W - 1) > 2 * L) return `more than 2x${L} in a span of ${W} ms from ${r.t}`;
      return null;
    }
    case "sliding-window": {
      // Weighted or not: at most `limit` in any `buckets` consecutive aligned sub-windows, hence in
      // any span of window - S + 1 ms; at most 2 x limit in any span of `window`.
      const S = W / lim.buckets;
      for (const r of reqs) {
        const j = Math.floor(r.t / S);
        for (const first of [j, j - lim.buckets + 1]) {
          const n = inSpan(first * S, (first + lim.buckets) * S - 1);
          if (n > L) return `${n} in sub-windows ${first}..${first + lim.buckets - 1}`;
        }
        if (inSpan(r.t, r.t + W - S) > L) return `more than ${L} in a span of ${W - S + 1} ms from ${r.t}`;
        if (inSpan(r.t, r.t + W - 1) > 2 * L) return `more than 2x${L} in a span of ${W} ms from ${r.t}`;
      }
      return null;
    }
    case "token-bucket":
    case "leaky-bucket":
    case "gcra":
      // In any span [t1, t2]: at most capacity + limit * (t2 - t1) / window units.
      for (let a = 0; a < reqs.length; a++) {
        let n = 0;
        for (let b = a; b < reqs.length; b++) {
          const ra = reqs[a] as Req;
          const rb = reqs[b] as Req;
          n += rb.c;
          if (n * W > lim.capacity * W + lim.limit * (rb.t - ra.t))
            return `${n} units in [${ra.t}, ${rb.t}] > ${lim.capacity} + ${lim.limit} x span / ${W}`;
        }
      }
      return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Direct access to the pure algorithms.

export interface Driver {
  lim: ResolvedLimit;
  state: LimitState;
  check(t: number, c: number): Outcome;
  commit(t: number, c: number): void;
  refund(t: number, c: number): void;
  snapshot(): { a: number; b: number; ring: number[] | null };
}

export function driver(spec: LimitSpec): Driver {
  const lim = resolveLimit(spec);
  const alg = ALGORITHM_IMPLS[lim.algorithm];
  const state = alg.init(lim);
  return {
    lim,
    state,
    check(t, c) {
      const out = newOutcome();
      alg.check(state, t, c, lim, out);
      return out;
    },
    commit: (t, c) => alg.commit(state, t, c, lim),
    refund: (t, c) => alg.refund(state, t, c, lim),
    snapshot: () => snapshotOf(state),
  };
}

export function snapshotOf(s: LimitState): { a: number; b: number; ring: number[] | null } {
  return { a: s.a, b: s.b, ring: s.ring ? Array.from(s.ring) : null };
}

// ---------------------------------------------------------------------------------------------
// The runner shared by the per-algorithm property files.

/**
 * Drives one limit's pure algorithm through `ops` beside the model and checks, at every step:
 * `check` changes nothing (so neither does a peek or a denial); decisions equal the model's
 * (allowed, remaining, and the shaping delay); the promised bound holds on the requests that count. Throws (via `expect`) on the first discrepancy.
 */
export function runAgainstModel(spec: LimitSpec, t0: number, ops: readonly Op[]): void {
  const d = driver(spec);
  const { lim } = d;
  const history = new History();
  let t = t0;
  for (const [step, op] of ops.entries()) {
    t += op.dt;
    const c = Math.min(op.c, lim.capacity);
    if (op.kind === "refund") {
      d.refund(t, c);
      history.refund(c);
      continue;
    }
    const before = d.snapshot();
    const out = d.check(t, c);
    expect(d.snapshot(), `check changed the state at step ${step}`).toEqual(before);
    // Every algorithm is exact against its model, refunds included (a refund takes back the
    // newest units, and each algorithm restores exactly the state it would have without them).
    const m = modelDecide(lim, history.reqs, t, c, history.high);
    const got = { allowed: out.allowed, remaining: out.remaining, delayMs: out.delayMs };
    expect(got, `step ${step}: cost ${c} at t0+${t - t0}`).toEqual(m);
    if (out.allowed) {
      expect(out.retryAfterMs).toBe(0);
      if (op.kind === "consume") {
        d.commit(t, c);
        history.admit(t, c);
      }
    } else {
      expect(out.retryAfterMs, "a denial names a positive wait").toBeGreaterThan(0);
      expect(out.delayMs).toBe(0);
    }
  }
  expect(boundViolation(lim, history.reqs)).toBeNull();
}
