import type { Outcome } from "../../core/decision.js";
import type { ResolvedLimit } from "../../core/options.js";
import { counterFits } from "./counter.js";
import { fastOutcome, FAST_ALGORITHMS } from "./fast-reply.js";
import type { Lane } from "./lanes.js";
import type { LoadedScript } from "./scripts.js";
import type { RedisStore } from "./store.js";

/** Whether a limiter's lone decisions can take the script's fast path (ratekeeper.lua, modes "C"/"P"). */
export function fastPathFits(limits: readonly ResolvedLimit[], store: RedisStore): boolean {
  return limits.length === 1 && FAST_ALGORITHMS.has((limits[0] as ResolvedLimit).algorithm) && store.opts.shim.evalshaBuffer !== undefined;
}

/**
 * One decision on one two-number limit by the script's fast path: a compact ARGV, and a reply
 * that is the state the script decided on (its bytes, or the counter layout's integer), from
 * which `check` gives the outcome (fast-reply.ts) with the memory store's arithmetic.
 *
 * The call is one chain of promises (the breaker's exchange, the script call), with no async
 * function in between: with hundreds of decisions in flight, every suspended async frame and
 * extra promise lives as long as the round trip, and their garbage was the largest part of the
 * client's CPU per decision (docs/benchmarks/redis.md).
 */
export class FastCall {
  /** ARGV[4..8]: limit, windowMs, kind (f / n / F / b / s), capacity, minTtlMs. */
  private readonly tail: string[];
  private readonly lim: ResolvedLimit;

  /**
   * @param out the Outcome the reply is read into (the limiter's own: read it before the next decision)
   * @param shapes whether the limit shapes (leaky bucket `mode: "shape"`): then the caller's longest wait goes along
   */
  constructor(
    private readonly store: RedisStore,
    limits: readonly ResolvedLimit[],
    private readonly script: LoadedScript,
    private readonly out: Outcome,
    private readonly shapes: boolean,
  ) {
    const l0 = limits[0] as ResolvedLimit;
    this.lim = l0;
    const kind =
      l0.algorithm !== "fixed-window" ? (l0.shape ? "s" : "b") : l0.alignFirst ? "F" : counterFits(l0, store.minTtlMs) ? "n" : "f";
    this.tail = [String(l0.limit), String(l0.windowMs), kind, String(l0.capacity), String(store.minTtlMs)];
  }

  /**
   * Sends the decision; resolves with the script's reply, for {@link FastCall.read}. A reply that
   * comes after the call was given up goes to `onLateAdmit` when the script admitted (and charged) it.
   * @throws (rejects) what the call met: a timeout, a Redis error
   */
  send(
    lane: Lane,
    keys: string[],
    now: number,
    consume: boolean,
    cost: number,
    maxDelayMs: number | undefined,
    onLateAdmit: () => void,
  ): Promise<unknown> {
    const t = this.tail;
    const args = [consume ? "C" : "P", String(now), String(cost), t[0], t[1], t[2], t[3], t[4]] as string[];
    if (this.shapes) args.push(maxDelayMs === undefined ? "" : String(maxDelayMs));
    const late = (raw: unknown): void => {
      if (!consume) return;
      try {
        if (this.read(raw, now, cost, maxDelayMs).allowed) onLateAdmit();
      } catch {
        // a reply that cannot be read: nothing known to give back
      }
    };
    return this.store.exchange(lane, () => this.store.run(lane, this.script, keys, args, true), 1, late);
  }

  /**
   * The outcome of a reply to {@link FastCall.send} (the shared Outcome, filled: read it at once).
   * @throws Error when the reply is not a state the script writes
   */
  read(raw: unknown, now: number, cost: number, maxDelayMs: number | undefined): Outcome {
    fastOutcome(raw, this.lim, now, cost, this.out, maxDelayMs);
    return this.out;
  }
}
