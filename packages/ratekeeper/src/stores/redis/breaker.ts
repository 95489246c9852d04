import type { BreakerState } from "./options.js";

/** How long the breaker stays open before its first probe, and the most it waits between probes (ms). */
const FIRST_PROBE_MS = 100;
const MAX_PROBE_MS = 500;
/** Consecutive failed calls (errors) that open the breaker; a timeout opens it at once. */
const ERRORS_TO_OPEN = 3;

/**
 * A circuit breaker for one lane of Redis (the connection, or a hash slot on a cluster). It tells
 * "down" from "slow": it opens on a timeout (Redis silent for `timeoutMs` with calls waiting) or
 * on consecutive errors, never on a slow local process (the lane's timeout already excludes that).
 *
 * - closed: calls go to Redis.
 * - open: no call is sent; the failure policy answers at once. After a pause the breaker goes
 *   half-open and the store sends one probe.
 * - half-open: the probe is out; decisions are still answered by the policy. Its success closes
 *   the breaker; its failure opens it again, with a longer pause (doubling, at most 500 ms, so
 *   that recovery follows Redis within about half a second).
 *
 * Pure state: the store drives it and runs the timers.
 */
export class Breaker {
  state: BreakerState = "closed";
  /** When an open breaker may send its probe (ms, the caller's clock). */
  probeAtMs = 0;
  private errors = 0;
  private pauseMs = FIRST_PROBE_MS;

  /** A call succeeded (any reply from Redis). Returns the new state when it changed. */
  succeeded(): BreakerState | undefined {
    this.errors = 0;
    if (this.state === "closed") return undefined;
    this.state = "closed";
    this.pauseMs = FIRST_PROBE_MS;
    return "closed";
  }

  /** A call failed: a timeout opens the breaker, errors open it after a few in a row. Returns the new state when it changed. */
  failed(timedOut: boolean, nowMs: number): BreakerState | undefined {
    if (this.state === "half-open") {
      this.pauseMs = Math.min(this.pauseMs * 2, MAX_PROBE_MS);
      return this.open(nowMs);
    }
    if (this.state === "open") return undefined;
    this.errors++;
    if (!timedOut && this.errors < ERRORS_TO_OPEN) return undefined;
    return this.open(nowMs);
  }

  /**
   * An open breaker goes half-open (the caller then sends its probe). The caller's timer keeps
   * the pause (`probeAtMs`); a timer may fire a fraction of a millisecond early, so no clock is read here.
   */
  probe(): boolean {
    if (this.state !== "open") return false;
    this.state = "half-open";
    return true;
  }

  private open(nowMs: number): BreakerState {
    this.state = "open";
    this.errors = 0;
    this.probeAtMs = nowMs + this.pauseMs;
    return "open";
  }
}
