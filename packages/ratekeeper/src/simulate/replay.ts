/*
 * The simulator's inner loop: one pass over every request of the traffic with every measure taken
 * in place. Each measure is a small class of typed arrays (the keys' states, the admissions, the
 * followed key's state) whose methods V8 inlines into the loop, so it keeps the speed of one
 * function without being one.
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
 * memory store expires keys).
 */
export function replay(lim: ResolvedLimit, spec: LimitSpec, ctx: Context): AlgorithmResult {
  const { timesMs, keyIds, costs } = ctx.traffic;
  const n = timesMs.length;
  const ev = new Evaluator([lim]);
  const rolling = new RollingWindow(lim.windowMs, ctx.traffic.keys.length);
  const keys = new KeyStates(ev, rolling, ctx.traffic.keys.length);
  const admissions = new Admissions(ctx, rolling);
  const followed = new FollowedKey(ctx, lim, ev);
  const retry = new RetryTally(ev, ctx.retrySamples, ctx.startMs, 2 * lim.windowMs * (lim.capacity + 1));
  for (let i = 0; i < n; i++) {
    const t = timesMs[i] as number;
    const k = keyIds[i] as number;
    const c = costs ? (costs[i] as number) : 1;
    followed.sampleUntil(t, keys.states[ctx.stateKey]);
    const st = keys.stateOf(k);
    const d = ev.run1(st, t, c, true);
    keys.keep(k, t + ev.ttlMs);
    if (k === ctx.stateKey) followed.after(st, t);
    if (d.allowed) admissions.admit(k, t, c, d.delayMs);
    else retry.denied(st, t, c, d.retryAfterMs);
    if ((i & (SWEEP_EVERY - 1)) === SWEEP_EVERY - 1) keys.sweep(t);
  }
  followed.sampleUntil(Infinity, keys.states[ctx.stateKey]);
  const { admitted, worst, worstAt, worstKey, delayed, delaySum, delayMax } = admissions;
  return {
    label: algorithmLabel(spec),
    spec,
    admitted,
    denied: n - admitted,
    worstInWindow: { units: worst, atMs: worstAt - ctx.startMs, key: ctx.traffic.keys[worstKey] as string },
    stateLabel: STATE_LABELS[lim.algorithm],
    delays: { delayed, meanMs: delayed > 0 ? delaySum / delayed : 0, maxMs: delayMax },
    bytesPerKey: stateBytes(lim),
    retry: retry.summary(),
    series: {
      admitted: Array.from(admissions.perBin),
      worstInWindow: Array.from(admissions.worstPerBin),
      state: Array.from(followed.perBin),
      stateMin: Array.from(followed.min),
      stateMax: Array.from(followed.max),
    },
  };
}

/** The keys' states, each dropped once its key is idle past its reset time. */
class KeyStates {
  /** By key index; undefined: the key is fresh. */
  readonly states: (LimitState | undefined)[];
  /** By key index: when its state equals a fresh one again. */
  private readonly expires: Float64Array;
  /** Keys holding a state or a rolling-window queue, for the sweep (`inLive`: whether listed). */
  private readonly live: Uint32Array;
  private readonly inLive: Uint8Array;
  private liveN = 0;

  constructor(
    private readonly ev: Evaluator,
    private readonly rolling: RollingWindow,
    keys: number,
  ) {
    this.states = new Array<LimitState | undefined>(keys);
    this.expires = new Float64Array(keys);
    this.live = new Uint32Array(keys);
    this.inLive = new Uint8Array(keys);
  }

  /** Key `k`'s state, created fresh on its first request or its first after being dropped. */
  stateOf(k: number): LimitState {
    let st = this.states[k];
    if (st === undefined) {
      st = this.states[k] = this.ev.init1();
      if (this.inLive[k] === 0) {
        this.inLive[k] = 1;
        this.live[this.liveN++] = k;
      }
    }
    return st;
  }

  /** Keeps key `k`'s state at least until `untilMs`. */
  keep(k: number, untilMs: number): void {
    if (untilMs > (this.expires[k] as number)) this.expires[k] = untilMs;
  }

  /** Drops the states of keys idle past their reset time, and their rolling-window queues; compacts the live list. */
  sweep(t: number): void {
    const { states, expires, live, inLive } = this;
    let kept = 0;
    for (let j = 0; j < this.liveN; j++) {
      const k = live[j] as number;
      if ((expires[k] as number) <= t) states[k] = undefined;
      const queueGone = this.rolling.release(k, t);
      if (states[k] !== undefined || !queueGone) live[kept++] = k;
      else inLive[k] = 0;
    }
    this.liveN = kept;
  }
}

/** The admitted requests: per time bucket, the most in any window, the shaping delays. */
class Admissions {
  admitted = 0;
  /** The most units one key had admitted within one window, when (ms) and which key. */
  worst = 0;
  worstAt = 0;
  worstKey = 0;
  delayed = 0;
  delaySum = 0;
  delayMax = 0;
  readonly perBin: Float64Array;
  readonly worstPerBin: Float64Array;

  constructor(
    private readonly ctx: Context,
    private readonly rolling: RollingWindow,
  ) {
    this.perBin = new Float64Array(ctx.bins);
    this.worstPerBin = new Float64Array(ctx.bins);
  }

  /** Key `k`'s request at `t` of cost `c`, admitted to proceed after `delayMs`. */
  admit(k: number, t: number, c: number, delayMs: number): void {
    this.admitted++;
    const at = t + delayMs;
    if (delayMs > 0) {
      this.delayed++;
      this.delaySum += delayMs;
      if (delayMs > this.delayMax) this.delayMax = delayMs;
    }
    const b = binOf(this.ctx, at);
    this.perBin[b] = (this.perBin[b] as number) + c;
    const inWindow = this.rolling.push(k, at, c);
    if (inWindow > (this.worstPerBin[b] as number)) this.worstPerBin[b] = inWindow;
    if (inWindow > this.worst) {
      this.worst = inWindow;
      this.worstAt = at;
      this.worstKey = k;
    }
  }
}

/** The followed key's state: at the end of each time bucket, and its extremes within each. */
class FollowedKey {
  readonly perBin: Float64Array;
  readonly min: Float64Array;
  readonly max: Float64Array;
  /** The next bucket to sample at its end, and when that end is. */
  private bin = 0;
  private binEndMs: number;

  constructor(
    private readonly ctx: Context,
    private readonly lim: ResolvedLimit,
    private readonly ev: Evaluator,
  ) {
    this.perBin = new Float64Array(ctx.bins);
    this.min = new Float64Array(ctx.bins).fill(Infinity);
    this.max = new Float64Array(ctx.bins).fill(-Infinity);
    this.binEndMs = ctx.startMs + ctx.binMs;
  }

  /** Samples `st`, the followed key's state, at the end of every bucket that ended by `t`. */
  sampleUntil(t: number, st: LimitState | undefined): void {
    for (; t >= this.binEndMs && this.bin < this.ctx.bins; this.binEndMs += this.ctx.binMs) {
      const v = stateReading(this.lim, freeUnits(this.ev, this.lim, st, this.binEndMs));
      this.perBin[this.bin] = v;
      this.note(this.bin++, v);
    }
  }

  /** The followed key's state `st` right after its request at `t`. */
  after(st: LimitState, t: number): void {
    this.note(binOf(this.ctx, t), stateReading(this.lim, freeUnits(this.ev, this.lim, st, t)));
  }

  private note(b: number, v: number): void {
    if (v < (this.min[b] as number)) this.min[b] = v;
    if (v > (this.max[b] as number)) this.max[b] = v;
  }
}

/** The units a key could admit now: its state read through a cost-1 peek. */
function freeUnits(ev: Evaluator, lim: ResolvedLimit, st: LimitState | undefined, t: number): number {
  if (st === undefined) return lim.capacity;
  const d = ev.run1(st, t, 1, false);
  return d.allowed ? d.remaining + 1 : d.remaining;
}
