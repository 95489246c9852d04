import { newDecision, type Decision, type Outcome } from "../../core/decision.js";
import { Evaluator } from "../../core/evaluate.js";
import { costTooHigh, maxCostOf } from "../../core/max-cost.js";
import type { ResolvedLimit } from "../../core/options.js";
import { counterFits } from "./counter.js";
import { keyPart } from "./key-part.js";

/**
 * The least TTL a written key gets by default (the stores' `minTtlMs`). A key whose TTL were
 * exactly its resetAfterMs, counted by Redis's clock from the write, could expire before a later
 * decision of the same window runs: that decision's time was read before it waited in a queue or
 * a socket, or on another server's clock, so it lags Redis and finds a fresh key (measured: 2,012
 * admitted in a window of 2,000 by processes hammering one key). Keeping keys 5 s longer than
 * that covers any lag a decision that was not already timed out can have; a longer TTL never
 * changes a decision (after resetAfterMs the state equals a fresh one), it only keeps the keys of
 * short windows in memory a little longer.
 */
export const DEFAULT_MIN_TTL_MS = 5_000;

/**
 * How one limiter's decisions travel to ratekeeper.lua and back: its keys, the ARGV header of
 * its limits, and the decision read from the reply. Shared by the Redis store (ioredis,
 * node-redis) and the HTTP Redis store (REST), so both write the same keys the same way and a
 * Node server and an edge function on one Redis share every key's state exactly.
 */
export class ScriptFormat {
  /** Evaluates several limits' outcomes into one decision, exactly as MemoryStore does. */
  readonly ev: Evaluator;
  /** ARGV[1..2+8N]: minTtlMs, N, then 8 entries per limit (ratekeeper.lua's header). */
  readonly head: string[];
  /** Limits per decision. */
  readonly n: number;
  private readonly single: boolean;
  private readonly keyHead: string;
  /**
   * The largest cost these limits could ever admit (core/max-cost.ts), which ratekeeper.lua takes
   * as given: RateLimiter never sends more, and a caller of a store's bind() gets RateLimiter's
   * RangeError ({@link ScriptFormat.refuseCost}). Past it the script's answers are no decisions:
   * a sliding log reads a unit past the log (the call fails, taken for a foreign value, and the
   * failure policy answers), a fixed window's peek of a new key says 0 remaining, a sliding
   * window's wait is -1, and a bucket's is a wait after which the request is still denied (above
   * 2^53 ms for a large cost, which the HTTP Redis store takes for a bad reply).
   */
  private readonly maxCost: number;

  constructor(
    private readonly limits: readonly ResolvedLimit[],
    prefix: string,
    namespace: string,
    minTtlMs: number,
  ) {
    this.ev = new Evaluator(limits);
    this.single = limits.length === 1;
    this.n = limits.length;
    this.head = [String(minTtlMs), String(limits.length)];
    for (const l of limits) {
      this.head.push(
        String(l.algorithmId),
        String(l.limit),
        String(l.windowMs),
        String(l.capacity),
        String(l.buckets),
        l.weighted ? "1" : "0",
        l.alignFirst ? "1" : counterFits(l, minTtlMs) ? "2" : "0",
        l.shape ? "1" : "0",
      );
    }
    this.keyHead = `${prefix}{${keyPart(namespace)}:`;
    this.maxCost = maxCostOf(limits);
  }

  /** A rejected decision for a cost these limits could never admit (Redis is not asked); undefined for any other. */
  refuseCost(cost: number): Promise<never> | undefined {
    if (cost <= this.maxCost) return undefined;
    return Promise.reject(costTooHigh(cost, this.maxCost));
  }

  /** The lane key of this limiter (its keys' common beginning). */
  get keyPrefix(): string {
    return this.keyHead;
  }

  /**
   * The Redis keys of `key`, one per limit, all with the hash tag `{<namespace>:<key>}` (the
   * namespace's `:` and `%` written `%3A` and `%25`, see {@link keyPart}): a
   * one-limit policy's key is `<prefix>{<namespace>:<key>}` (no suffix: every byte of a key name
   * is Redis memory), several limits' keys end in `:<index>`.
   */
  keysOf(key: string): string[] {
    if (this.single) return [`${this.keyHead}${key}}`];
    const head = `${this.keyHead}${key}}:`;
    const keys = new Array<string>(this.n);
    for (let i = 0; i < this.n; i++) keys[i] = head + i;
    return keys;
  }

  /**
   * The keys a reset of `key` adds after every decision's state keys, one per reset of the call:
   * a one-limit policy's reset epoch, `<its key>:e` (same hash tag; ratekeeper.lua's "x", read
   * by quota leasing, lease.lua). Declared like every key a script touches (a cluster routes by
   * them, and stores such as Dragonfly refuse undeclared ones). None for several limits.
   */
  resetKeysOf(key: string): string[] {
    return this.single ? [`${this.keyHead}${key}}:e`] : [];
  }

  /** Builds the decision from the script's 5 integers per limit, exactly as `Evaluator.run` does. */
  decision(r: readonly unknown[], cost: number): Decision {
    const outs = this.ev.outcomes;
    let allowed = true;
    for (let i = 0; i < this.n; i++) {
      const o = outs[i] as Outcome;
      o.allowed = Number(r[5 * i]) === 1;
      o.remaining = Number(r[5 * i + 1]);
      o.retryAfterMs = Number(r[5 * i + 2]);
      o.resetAfterMs = Number(r[5 * i + 3]);
      o.delayMs = Number(r[5 * i + 4]);
      if (!o.allowed) allowed = false;
    }
    return this.single ? newDecision(outs[0] as Outcome, this.limits[0] as ResolvedLimit, 0, undefined) : this.ev.combine(allowed, cost);
  }
}
