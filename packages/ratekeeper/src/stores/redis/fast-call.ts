import type { Outcome } from "../../core/decision.js";
import type { ResolvedLimit } from "../../core/options.js";
import { counterFits } from "./counter.js";
import { fastOutcome, FAST_ALGORITHMS, LOG_WHOLE_MAX, scriptLimit } from "./fast-reply.js";
import type { Lane } from "./lanes.js";
import type { FastConsts } from "./script-source.js";
import type { LoadedScript } from "./scripts.js";
import type { RedisStore } from "./store.js";

/**
 * The fast path's constants for a limiter's script (written into it: script-source.ts), or
 * undefined when its lone decisions cannot take the fast path (ratekeeper.lua, modes "C"/"P"):
 * one limit with a two-number state, a sliding window or a sliding log, on a client that can
 * return raw bytes.
 */
export function fastConsts(limits: readonly ResolvedLimit[], store: RedisStore): FastConsts | undefined {
  const l0 = limits[0] as ResolvedLimit;
  if (limits.length !== 1 || !FAST_ALGORITHMS.has(l0.algorithm) || store.opts.shim.evalshaBuffer === undefined) return undefined;
  if (l0.algorithm === "sliding-log") {
    // "l": the whole value read and rewritten (up to 1,048 bytes); "L": ranges, as the general code.
    const kind = l0.limit <= LOG_WHOLE_MAX ? "l" : "L";
    return { limit: l0.limit, windowMs: l0.windowMs, kind, capacity: l0.capacity, minTtlMs: store.minTtlMs };
  }
  if (l0.algorithm === "sliding-window") {
    // "w" weighted, "v" not; the capacity slot carries the sub-window count.
    return { limit: l0.limit, windowMs: l0.windowMs, kind: l0.weighted ? "w" : "v", capacity: l0.buckets, minTtlMs: store.minTtlMs };
  }
  const kind = l0.algorithm !== "fixed-window" ? (l0.shape ? "s" : "b") : l0.alignFirst ? "F" : counterFits(l0, store.minTtlMs) ? "n" : "f";
  return { limit: l0.limit, windowMs: l0.windowMs, kind, capacity: l0.capacity, minTtlMs: store.minTtlMs };
}

/** One decision of a batch for {@link FastCall.sendBatch}. */
export interface FastItem {
  readonly consume: boolean;
  readonly now: number;
  readonly cost: number;
  readonly maxDelayMs: number | undefined;
}

/**
 * Decisions on one limit (a two-number state, or a sliding window) by the script's fast path: a
 * compact ARGV (mode, time, cost; the limit's constants are written into the limiter's own
 * script), and a reply that is the state the script decided on (its bytes, or the counter
 * layout's integer), from which `check` gives the outcome (fast-reply.ts) with the memory store's
 * arithmetic. One decision goes as modes "C"/"P"; a batch as mode "B", one key per decision.
 *
 * The call is one chain of promises (the breaker's exchange, the script call), with no async
 * function in between: with hundreds of decisions in flight, every suspended async frame and
 * extra promise lives as long as the round trip, and their garbage was the largest part of the
 * client's CPU per decision (docs/benchmarks/redis.md).
 */
export class FastCall {
  /** The limit, with a bucket's level in the script's units (fast-reply.ts scriptLimit). */
  private readonly lim: ResolvedLimit;

  /**
   * @param script the limiter's script, built with its {@link fastConsts}
   * @param out the Outcome the reply is read into (the limiter's own: read it before the next decision)
   * @param shapes whether the limit shapes (leaky bucket `mode: "shape"`): then the caller's longest wait goes along
   */
  constructor(
    private readonly store: RedisStore,
    limits: readonly ResolvedLimit[],
    readonly script: LoadedScript,
    private readonly out: Outcome,
    private readonly shapes: boolean,
  ) {
    this.lim = scriptLimit(limits[0] as ResolvedLimit);
  }

  /** The limiter's script's SHA-1 (its EVALSHA). */
  get sha(): string {
    return this.script.sha;
  }

  /** The script's ARGV for one decision (modes "C"/"P"). */
  args(now: number, consume: boolean, cost: number, maxDelayMs: number | undefined): string[] {
    const mode = consume ? "C" : "P";
    return this.shapes
      ? [mode, String(now), String(cost), maxDelayMs === undefined ? "" : String(maxDelayMs)]
      : [mode, String(now), String(cost)];
  }

  /**
   * Sends the decision; resolves with the script's reply, for {@link FastCall.read}. A reply that
   * comes after the call was given up goes to `onLateAdmit` when the script admitted (and charged) it.
   * (An unbatched decision goes by a FastOp instead, fast-op.ts, with the same semantics.)
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
    const args = this.args(now, consume, cost, maxDelayMs);
    const late = (raw: unknown): void => {
      if (consume && this.admitted(raw, now, cost, maxDelayMs)) onLateAdmit();
    };
    return this.store.exchange(lane, () => this.store.run(lane, this.script, keys, args, true), 1, late);
  }

  /**
   * Sends a batch of such decisions in one script call (mode "B": one key each, in order);
   * resolves with the script's replies, one per decision, for {@link FastCall.read}. When the
   * reply comes after the call was given up, `onLateAdmit(i)` is told of each consume it admitted.
   */
  sendBatch(lane: Lane, keys: string[], batch: readonly FastItem[], onLateAdmit: (i: number) => void): Promise<unknown> {
    const args = ["B"];
    for (const b of batch) {
      args.push(b.consume ? "C" : "P", String(b.now), String(b.cost));
      if (this.shapes) args.push(b.maxDelayMs === undefined ? "" : String(b.maxDelayMs));
    }
    const late = (reply: unknown): void => {
      if (!Array.isArray(reply) || reply.length !== batch.length) return;
      batch.forEach((b, i) => {
        if (b.consume && this.admitted(reply[i], b.now, b.cost, b.maxDelayMs)) onLateAdmit(i);
      });
    };
    return this.store.exchange(lane, () => this.store.run(lane, this.script, keys, args, true), batch.length, late);
  }

  /** Whether a late reply admitted (and charged) its consume; false for a reply that cannot be read (nothing known to give back). */
  admitted(raw: unknown, now: number, cost: number, maxDelayMs: number | undefined): boolean {
    try {
      return this.read(raw, now, cost, maxDelayMs).allowed;
    } catch {
      return false;
    }
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
