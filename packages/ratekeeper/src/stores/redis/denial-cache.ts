import type { Decision } from "../../core/decision.js";

/**
 * A remembered denial: until when (ms, the store's clock) requests costing >= cost, and willing
 * to wait no longer than `maxDelayMs` when shaping, are denied.
 */
interface Denial {
  untilMs: number;
  cost: number;
  /** The shaping bound the denial was decided with (undefined: none, a denial for every bound). */
  maxDelayMs: number | undefined;
  atMs: number;
  d: Decision;
}

/**
 * Recent denials of one limiter, per key: a key denied with `retryAfterMs = R` is denied again
 * without a Redis call (`reason: "denial-cache"`) until R has passed, for requests costing at
 * least as much. A flood from one client then costs Redis one call per R. Bounded: past
 * `maxKeys` the oldest entry is dropped.
 */
export class DenialCache {
  private readonly m = new Map<string, Denial>();

  constructor(private readonly maxKeys: number) {}

  /**
   * The cached denial for `key` at `nowMs`, or undefined (then ask Redis).
   * @param maxDelayMs the request's shaping bound: a denial decided under a stricter one does not answer it
   */
  get(key: string, cost: number, nowMs: number, maxDelayMs?: number): Decision | undefined {
    const hit = this.m.get(key);
    if (hit === undefined) return undefined;
    if (nowMs >= hit.untilMs || nowMs < hit.atMs) {
      this.m.delete(key);
      return undefined;
    }
    if (cost < hit.cost) return undefined;
    if (hit.maxDelayMs !== undefined && (maxDelayMs === undefined || maxDelayMs > hit.maxDelayMs)) return undefined;
    const elapsed = nowMs - hit.atMs;
    return {
      ...hit.d,
      retryAfterMs: hit.untilMs - nowMs,
      resetAfterMs: Math.max(hit.untilMs - nowMs, hit.d.resetAfterMs - elapsed),
      reason: "denial-cache",
    };
  }

  /** Remembers a denial Redis gave at `nowMs` (to a request with the shaping bound `maxDelayMs`). */
  remember(key: string, cost: number, nowMs: number, d: Decision, maxDelayMs?: number): void {
    if (d.retryAfterMs <= 0) return;
    this.m.delete(key);
    if (this.m.size >= this.maxKeys) {
      // Drop the oldest entry (a Map keeps insertion order).
      const first = this.m.keys().next();
      if (!first.done) this.m.delete(first.value);
    }
    this.m.set(key, { untilMs: nowMs + d.retryAfterMs, cost, maxDelayMs, atMs: nowMs, d });
  }

  /** Forgets `key` (a refund or reset changed its state). */
  delete(key: string): void {
    this.m.delete(key);
  }
}
