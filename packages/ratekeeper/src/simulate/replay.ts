/*
 * The simulator's inner loop. `replay` is longer than the usual 60 lines on purpose: it is one
 * pass over every request of the traffic with every measure taken in place (admissions per
 * bucket, the rolling window, retryAfter checks, the followed key's state, idle-key sweeps), and
 * splitting it into per-measure passes or callbacks would cost the simulator its speed.
 */
import type { LimitState } from "../core/algorithms/types.js";
import { Evaluator } from "../core/evaluate.js";
import type { LimitSpec, ResolvedLimit } from "../core/options.js";
import { STATE_LABELS, algorithmLabel, stateBytes, stateReading } from "./algorithms.js";
import { RetryTally } from "./retry.js";
import { RollingWindow } from "./rolling.js";
import type { AlgorithmResult } from "./run.js";
import type { Traffic } from "./traffic.js";

/** What every algorithm's replay shares: the traffic and the time buckets. */
export interface Context {
  readonly traffic: Traffic;
  readonly startMs: number;
  readonly binMs: number;
  readonly bins: number;
  /** Index of the key whose state is sampled. */
  readonly stateKey: number;
  readonly retrySamples: number;
}

/** The time bucket of `t`; times past the end (a shaped request proceeding late) go to the last one. */
export function binOf(ctx: Context, t: number): number {
  const b = Math.floor((t - ctx.startMs) / ctx.binMs);
  return b < 0 ? 0 : b >= ctx.bins ? ctx.bins - 1 : b;
}

/** Sweep idle keys every this many requests, so memory follows the keys active now, not every key ever seen. */
const SWEEP_EVERY = 1 << 16;

/**
 * Replays the traffic through one algorithm: one state per key, created on the key's first
 * request and dropped once it equals a fresh one again (the decision's `resetAfterMs`, as the
 * memory store expires keys). Long by design: one pass over the requests with every measure
 * taken in place, since this loop is the simulator's whole cost.
 */
export function replay(lim: ResolvedLimit, spec: LimitSpec, ctx: Context): AlgorithmResult {
  const { traffic, binMs, bins, stateKey } = ctx;
  const { timesMs, keyIds, costs } = traffic;
  const n = timesMs.length;
  const K = traffic.keys.length;
  const ev = new Evaluator([lim]);
  const states = new Array<LimitState | undefined>(K);
  const expires = new Float64Array(K);
  // Keys holding a state or a rolling-window queue, for the sweep (inLive: whether listed).
  const live = new Uint32Array(K);
  const inLive = new Uint8Array(K);
  let liveN = 0;
  const rolling = new RollingWindow(lim.windowMs, K);
  const retry = new RetryTally(ev, ctx.retrySamples, ctx.startMs, 2 * lim.windowMs * (lim.capacity + 1));
  const admittedPerBin = new Float64Array(bins);
  const worstPerBin = new Float64Array(bins);
  const statePerBin = new Float64Array(bins);
  // The followed key's state also right after each of its requests: the extremes within a bucket.
  const stateMin = new Float64Array(bins).fill(Infinity);
  const stateMax = new Float64Array(bins).fill(-Infinity);
  const note = (b: number, v: number) => {
    if (v < (stateMin[b] as number)) stateMin[b] = v;
    if (v > (stateMax[b] as number)) stateMax[b] = v;
  };
  const endOfBin = (b: number, t: number) => {
    const v = stateReading(lim, freeUnits(ev, lim, states[stateKey], t));
    statePerBin[b] = v;
    note(b, v);
  };
  let admitted = 0;
  let worst = 0;
  let worstAt = 0;
  let worstKey = 0;
  let delayed = 0;
  let delaySum = 0;
  let delayMax = 0;
  let sampleBin = 0;
  let nextSample = ctx.startMs + binMs;
  for (let i = 0; i < n; i++) {
    const t = timesMs[i] as number;
    const k = keyIds[i] as number;
    const c = costs ? (costs[i] as number) : 1;
    // The followed key's state at the end of each bucket that ended before this request.
    for (; t >= nextSample && sampleBin < bins; nextSample += binMs) endOfBin(sampleBin++, nextSample);
    let st = states[k];
    if (st === undefined) {
      st = states[k] = ev.init1();
      if (inLive[k] === 0) {
        inLive[k] = 1;
        live[liveN++] = k;
      }
    }
    const d = ev.run1(st, t, c, true);
    if (t + ev.ttlMs > (expires[k] as number)) expires[k] = t + ev.ttlMs;
    if (k === stateKey) note(binOf(ctx, t), stateReading(lim, freeUnits(ev, lim, st, t)));
    if (d.allowed) {
      admitted++;
      const at = t + d.delayMs;
      if (d.delayMs > 0) {
        delayed++;
        delaySum += d.delayMs;
        if (d.delayMs > delayMax) delayMax = d.delayMs;
      }
      const b = binOf(ctx, at);
      admittedPerBin[b] = (admittedPerBin[b] as number) + c;
      const inWindow = rolling.push(k, at, c);
      if (inWindow > (worstPerBin[b] as number)) worstPerBin[b] = inWindow;
      if (inWindow > worst) {
        worst = inWindow;
        worstAt = at;
        worstKey = k;
      }
    } else retry.denied(st, t, c, d.retryAfterMs);
    if ((i & (SWEEP_EVERY - 1)) === SWEEP_EVERY - 1) liveN = sweep(states, expires, rolling, live, inLive, liveN, t);
  }
  for (; sampleBin < bins; nextSample += binMs) endOfBin(sampleBin++, nextSample);
  return {
    label: algorithmLabel(spec),
    spec,
    admitted,
    denied: n - admitted,
    worstInWindow: { units: worst, atMs: worstAt - ctx.startMs, key: traffic.keys[worstKey] as string },
    stateLabel: STATE_LABELS[lim.algorithm],
    delays: { delayed, meanMs: delayed > 0 ? delaySum / delayed : 0, maxMs: delayMax },
    bytesPerKey: stateBytes(lim),
    retry: retry.summary(),
    series: {
      admitted: Array.from(admittedPerBin),
      worstInWindow: Array.from(worstPerBin),
      state: Array.from(statePerBin),
      stateMin: Array.from(stateMin),
      stateMax: Array.from(stateMax),
    },
  };
}

/** Drops the states of keys idle past their reset time, and their rolling-window queues; compacts the live list. */
function sweep(
  states: (LimitState | undefined)[],
  expires: Float64Array,
  rolling: RollingWindow,
  live: Uint32Array,
  inLive: Uint8Array,
  liveN: number,
  t: number,
): number {
  let kept = 0;
  for (let j = 0; j < liveN; j++) {
    const k = live[j] as number;
    if ((expires[k] as number) <= t) states[k] = undefined;
    const queueGone = rolling.release(k, t);
    if (states[k] !== undefined || !queueGone) live[kept++] = k;
    else inLive[k] = 0;
  }
  return kept;
}

/** The units a key could admit now: its state read through a cost-1 peek. */
function freeUnits(ev: Evaluator, lim: ResolvedLimit, st: LimitState | undefined, t: number): number {
  if (st === undefined) return lim.capacity;
  const d = ev.run1(st, t, 1, false);
  return d.allowed ? d.remaining + 1 : d.remaining;
}
