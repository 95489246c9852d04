import { bucket } from "./algorithms/bucket.js";
import { fixedWindow } from "./algorithms/fixed-window.js";
import { ALGORITHM_IMPLS, type Algorithm, type LimitState } from "./algorithms/index.js";
import { slidingLog } from "./algorithms/sliding-log.js";
import { slidingWindow } from "./algorithms/sliding-window.js";
import { newDecision, newOutcome, type Decision, type LimitOutcome, type Outcome } from "./decision.js";
import type { ResolvedLimit } from "./options.js";

/*
 * Dispatch by kind, not through `algorithm.check(...)`: a call site that has seen two different
 * functions is megamorphic in V8 (no inlining, an indirect call per decision), which happens as
 * soon as one process runs, say, a fixed window and a GCRA limiter. A switch gives each algorithm
 * its own call site, which stays monomorphic and is inlined into the store's consume. Unknown
 * algorithms fall back to the generic call. Measured: 6% faster per decision on a hot key in a
 * process using every algorithm, no change with one (docs/benchmarks/memory.md).
 *
 * So `checkKind`, `commitKind` and `consume1` repeat one switch on purpose, and `run` calls the
 * first two with the same arguments from two loops: folding them into one helper that takes the
 * method to call would make that call site megamorphic again. A duplicate finder lists them;
 * they are the only deliberate copies in the library.
 */
const KIND_GENERIC = 0;
const KIND_FIXED = 1;
const KIND_LOG = 2;
const KIND_SLIDING = 3;
const KIND_BUCKET = 4;

function kindOf(alg: Algorithm): number {
  if (alg === fixedWindow) return KIND_FIXED;
  if (alg === slidingLog) return KIND_LOG;
  if (alg === slidingWindow) return KIND_SLIDING;
  if (alg === bucket) return KIND_BUCKET;
  return KIND_GENERIC;
}

/** `alg.check(...)` through the kind switch: one monomorphic call site per algorithm. */
function checkKind(
  kind: number,
  alg: Algorithm,
  st: LimitState,
  nowMs: number,
  cost: number,
  lim: ResolvedLimit,
  out: Outcome,
  maxDelayMs: number | undefined,
): void {
  switch (kind) {
    case KIND_BUCKET:
      return bucket.check(st, nowMs, cost, lim, out, maxDelayMs);
    case KIND_FIXED:
      return fixedWindow.check(st, nowMs, cost, lim, out);
    case KIND_SLIDING:
      return slidingWindow.check(st, nowMs, cost, lim, out);
    case KIND_LOG:
      return slidingLog.check(st, nowMs, cost, lim, out);
    default:
      return alg.check(st, nowMs, cost, lim, out, maxDelayMs);
  }
}

/** `alg.commit(...)` through the kind switch. */
function commitKind(kind: number, alg: Algorithm, st: LimitState, nowMs: number, cost: number, lim: ResolvedLimit): void {
  switch (kind) {
    case KIND_BUCKET:
      return bucket.commit(st, nowMs, cost, lim);
    case KIND_FIXED:
      return fixedWindow.commit(st, nowMs, cost, lim);
    case KIND_SLIDING:
      return slidingWindow.commit(st, nowMs, cost, lim);
    case KIND_LOG:
      return slidingLog.commit(st, nowMs, cost, lim);
    default:
      return alg.commit(st, nowMs, cost, lim);
  }
}

/** Resets a state in place to a fresh one (a = b = 0, ring zeroed), keeping its ring. */
export function clearState(s: LimitState): void {
  s.a = 0;
  s.b = 0;
  if (s.ring !== null) s.ring.fill(0);
}

/**
 * Runs one decision over the states of every limit on a key: pure, no I/O.
 * Several limits are all-or-nothing: if one denies, none is charged. The decision reports the
 * most restrictive limit: when denied, the denying limit with the longest wait (so `retryAfterMs`
 * is when every limit admits the cost: counts never grow while nobody asks); when allowed,
 * the one with the fewest units left.
 */
export class Evaluator {
  readonly limits: readonly ResolvedLimit[];
  private readonly algs: readonly Algorithm[];
  private readonly outs: Outcome[];
  /** Scratch for the combined outcome of several limits. */
  private readonly total: Outcome = newOutcome();
  private readonly single: boolean;
  // The first limit, unpacked: with one limit (the common case) the hot path reads these fields
  // and never indexes the arrays above.
  private readonly lim0: ResolvedLimit;
  private readonly alg0: Algorithm;
  private readonly out0: Outcome;
  private readonly kind0: number;
  private readonly kinds: readonly number[];

  constructor(limits: readonly ResolvedLimit[]) {
    this.limits = limits;
    this.algs = limits.map((l) => ALGORITHM_IMPLS[l.algorithm]);
    this.outs = limits.map(() => newOutcome());
    this.single = limits.length === 1;
    this.lim0 = limits[0] as ResolvedLimit;
    this.alg0 = this.algs[0] as Algorithm;
    this.out0 = this.outs[0] as Outcome;
    this.kinds = this.algs.map(kindOf);
    this.kind0 = this.kinds[0] as number;
  }

  /** Fresh states for a key never seen. */
  init(): LimitState[] {
    return this.limits.map((l, i) => (this.algs[i] as Algorithm).init(l));
  }

  /** Resets `states` in place to fresh ones (for an expired entry), keeping their rings. */
  clear(states: LimitState[]): void {
    for (const s of states) clearState(s);
  }

  /** A fresh state for the first limit: the single-limit form of {@link Evaluator.init}. */
  init1(): LimitState {
    return this.alg0.init(this.lim0);
  }

  /**
   * Decides `cost` at `nowMs`; when `commit` and allowed, charges every limit.
   * `this.ttlMs` is left holding how long the states matter after this call.
   * @param maxDelayMs shaping: a longer wait is a denial (see {@link Algorithm.check}); undefined: no bound
   */
  run(states: LimitState[], nowMs: number, cost: number, commit: boolean, maxDelayMs?: number): Decision {
    if (this.single) return this.run1(states[0] as LimitState, nowMs, cost, commit, maxDelayMs);
    let allowed = true;
    const n = this.limits.length;
    // All or nothing: check every limit, then charge them only if all allow. The two loops pass
    // the same arguments to two switches of their own (checkKind, commitKind), for V8's inlining
    // (see the top of this file).
    for (let i = 0; i < n; i++) {
      const out = this.outs[i] as Outcome;
      checkKind(
        this.kinds[i] as number,
        this.algs[i] as Algorithm,
        states[i] as LimitState,
        nowMs,
        cost,
        this.limits[i] as ResolvedLimit,
        out,
        maxDelayMs,
      );
      if (!out.allowed) allowed = false;
    }
    if (allowed && commit) {
      for (let i = 0; i < n; i++) {
        commitKind(
          this.kinds[i] as number,
          this.algs[i] as Algorithm,
          states[i] as LimitState,
          nowMs,
          cost,
          this.limits[i] as ResolvedLimit,
        );
      }
    }
    return this.combine(allowed, cost);
  }

  /** How long the states of the last `run` matter (ms): after it they equal fresh states. */
  ttlMs = 0;

  /**
   * {@link Evaluator.run} for a limiter with exactly one limit, given that limit's state: the
   * memory store's hot path. Same decision, same `ttlMs`.
   */
  run1(st: LimitState, nowMs: number, cost: number, commit: boolean, maxDelayMs?: number): Decision {
    return commit ? this.consume1(st, nowMs, cost, maxDelayMs) : this.peek1(st, nowMs, cost, maxDelayMs);
  }

  /**
   * `run1(st, nowMs, cost, true)`: each algorithm's fused check-and-commit through the kind switch.
   *
   * Kept small on purpose: V8 inlines a call chain only while its bytecode adds up to less than
   * 920 bytes (and each function is under 460). Branches for algorithms a process never runs get
   * no type feedback and compile to nothing, but their bytecode still counts against that budget
   * (231 bytes here, whichever algorithm runs), so the memory store's tables of one limit call
   * their algorithm without this switch (stores/memory-kinds.ts); it serves the simulator.
   */
  consume1(st: LimitState, nowMs: number, cost: number, maxDelayMs?: number): Decision {
    const out = this.out0;
    const lim = this.lim0;
    switch (this.kind0) {
      case KIND_BUCKET:
        bucket.consume(st, nowMs, cost, lim, out, maxDelayMs);
        break;
      case KIND_FIXED:
        fixedWindow.consume(st, nowMs, cost, lim, out);
        break;
      case KIND_SLIDING:
        slidingWindow.consume(st, nowMs, cost, lim, out);
        break;
      case KIND_LOG:
        slidingLog.consume(st, nowMs, cost, lim, out);
        break;
      default:
        this.alg0.consume(st, nowMs, cost, lim, out, maxDelayMs);
    }
    return this.decide1();
  }

  /** `run1(st, nowMs, cost, false)`: the decision, changing nothing. */
  peek1(st: LimitState, nowMs: number, cost: number, maxDelayMs?: number): Decision {
    checkKind(this.kind0, this.alg0, st, nowMs, cost, this.lim0, this.out0, maxDelayMs);
    return this.decide1();
  }

  /** The decision of the single limit from its outcome; sets `ttlMs`. */
  private decide1(): Decision {
    this.ttlMs = this.out0.resetAfterMs;
    return newDecision(this.out0, this.lim0, 0, undefined);
  }

  /**
   * Builds the decision from outcomes already written into the scratch space (by `run`, or by a
   * store that computed them elsewhere, such as a Lua script): see {@link Evaluator.outcomes}.
   */
  combine(allowed: boolean, cost: number): Decision {
    const n = this.limits.length;
    const limits = new Array<LimitOutcome>(n);
    let pick = -1;
    let ttl = 0;
    let delay = 0;
    for (let i = 0; i < n; i++) {
      const o = this.outs[i] as Outcome;
      const l = this.limits[i] as ResolvedLimit;
      limits[i] = {
        name: l.name,
        allowed: o.allowed,
        limit: l.limit,
        // A limit that would have admitted reports `remaining` after the charge; when another limit
        // denied, nothing was charged, so give the cost back (all-or-nothing).
        remaining: allowed || !o.allowed ? o.remaining : Math.min(o.remaining + cost, l.capacity),
        retryAfterMs: o.retryAfterMs,
        resetAfterMs: o.resetAfterMs,
        windowMs: l.windowMs,
      };
      if (o.resetAfterMs > ttl) ttl = o.resetAfterMs;
      if (o.delayMs > delay) delay = o.delayMs;
      if (pick < 0) pick = i;
      else {
        const p = this.outs[pick] as Outcome;
        if (allowed ? o.remaining < p.remaining : !o.allowed && (p.allowed || o.retryAfterMs > p.retryAfterMs)) pick = i;
      }
    }
    this.ttlMs = ttl;
    const o = this.outs[pick] as Outcome;
    const total = this.total;
    total.allowed = allowed;
    total.remaining = o.remaining;
    total.retryAfterMs = allowed ? 0 : o.retryAfterMs;
    total.resetAfterMs = ttl;
    total.delayMs = allowed ? delay : 0;
    return newDecision(total, this.limits[pick] as ResolvedLimit, pick, limits);
  }

  /** The scratch outcomes, one per limit, for stores that compute them elsewhere. */
  get outcomes(): readonly Outcome[] {
    return this.outs;
  }

  /** Gives back `cost` units on every limit. */
  refund(states: LimitState[], nowMs: number, cost: number): void {
    for (let i = 0; i < this.limits.length; i++) {
      (this.algs[i] as Algorithm).refund(states[i] as LimitState, nowMs, cost, this.limits[i] as ResolvedLimit);
    }
  }
}
