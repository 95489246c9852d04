import type { Evaluator } from "../core/evaluate.js";
import type { LimitState } from "../core/algorithms/types.js";

/** One denial: when it happened, the `retryAfterMs` it was given, and the shortest wait that really works. */
export interface RetrySample {
  /** Time of the denial, ms since the start of the traffic. */
  readonly atMs: number;
  readonly givenMs: number;
  readonly realMs: number;
}

/** How truthful and how tight the `retryAfterMs` of every denial was. */
export interface RetrySummary {
  readonly denials: number;
  /** Denials whose `retryAfterMs` was enough: the same request, retried after it with nothing else in between, is admitted. */
  readonly truthful: number;
  /** Truthful denials where one millisecond less would not have been enough. */
  readonly exact: number;
  /** The most a `retryAfterMs` exceeded the shortest wait that works (ms). */
  readonly maxOverMs: number;
  /** The most a `retryAfterMs` fell short of it (ms; 0 when every one was truthful). */
  readonly maxShortMs: number;
  readonly medianGivenMs: number;
  readonly maxGivenMs: number;
  /** Up to the sample budget, spread evenly over the run. */
  readonly samples: readonly RetrySample[];
}

/**
 * Checks each denial's `retryAfterMs` against the shortest wait that really works, found by
 * peeking (a decision that changes nothing) at later times on the key's state: with no other
 * requests a key's count never grows, so admission is monotone in the wait and a binary search
 * finds the shortest one. Peeks at `now + retryAfterMs` and one millisecond before cover the
 * usual, exact case in two calls.
 */
export class RetryTally {
  private denials = 0;
  private truthful = 0;
  private exact = 0;
  private maxOverMs = 0;
  private maxShortMs = 0;
  private given = new Float64Array(1024);
  private readonly samples: RetrySample[] = [];
  private stride = 1;

  constructor(
    private readonly ev: Evaluator,
    private readonly budget: number,
    private readonly originMs: number,
    private readonly horizonMs: number,
  ) {}

  /** Records a denial at `t` of `cost` on state `st`, which was told `givenMs`. */
  denied(st: LimitState, t: number, cost: number, givenMs: number): void {
    if (this.denials === this.given.length) {
      const g = new Float64Array(this.given.length * 2);
      g.set(this.given);
      this.given = g;
    }
    this.given[this.denials++] = givenMs;
    const okAtGiven = this.admits(st, t + givenMs, cost);
    let realMs = givenMs;
    if (okAtGiven) {
      this.truthful++;
      if (givenMs === 0 || !this.admits(st, t + givenMs - 1, cost)) this.exact++;
      else realMs = this.search(st, t, cost, 0, givenMs - 1);
      if (givenMs - realMs > this.maxOverMs) this.maxOverMs = givenMs - realMs;
    } else {
      // Understated: look further out, doubling, for a wait that works.
      let hi = Math.max(1, givenMs * 2);
      while (!this.admits(st, t + hi, cost) && hi < this.horizonMs) hi *= 2;
      realMs = this.search(st, t, cost, givenMs + 1, hi);
      if (realMs - givenMs > this.maxShortMs) this.maxShortMs = realMs - givenMs;
    }
    this.sample(t, givenMs, realMs);
  }

  summary(): RetrySummary {
    const given = this.given.subarray(0, this.denials).slice().sort();
    return {
      denials: this.denials,
      truthful: this.truthful,
      exact: this.exact,
      maxOverMs: this.maxOverMs,
      maxShortMs: this.maxShortMs,
      medianGivenMs: given.length > 0 ? (given[(given.length - 1) >> 1] as number) : 0,
      maxGivenMs: given.length > 0 ? (given[given.length - 1] as number) : 0,
      samples: this.samples.slice(),
    };
  }

  private admits(st: LimitState, t: number, cost: number): boolean {
    return this.ev.run1(st, t, cost, false).allowed;
  }

  /** The smallest wait in [lo, hi] that admits (hi admits). */
  private search(st: LimitState, t: number, cost: number, lo: number, hi: number): number {
    while (lo < hi) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.admits(st, t + mid, cost)) hi = mid;
      else lo = mid + 1;
    }
    return hi;
  }

  /** Keeps every `stride`-th denial; when the budget fills, drops every other one and doubles the stride. */
  private sample(t: number, givenMs: number, realMs: number): void {
    if ((this.denials - 1) % this.stride !== 0) return;
    this.samples.push({ atMs: t - this.originMs, givenMs, realMs });
    if (this.samples.length >= this.budget * 2) {
      let j = 0;
      for (let i = 0; i < this.samples.length; i += 2) this.samples[j++] = this.samples[i] as RetrySample;
      this.samples.length = j;
      this.stride *= 2;
    }
  }
}
