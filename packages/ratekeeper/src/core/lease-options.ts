import { parseDuration, type Duration } from "./duration.js";
import { describeValue, type ConfigIssue } from "./errors.js";
import { leasable } from "./lease-block.js";
import type { ResolvedLimit } from "./options.js";
import { isPlainObject } from "./plain-object.js";

/**
 * Quota leasing for a hot key (RateLimiter option `lease`): each process takes blocks of the
 * key's allowance from the store and decides locally (docs/leasing.md).
 * @example { lease: true }
 * @example { lease: { blockMs: "200ms" } }
 */
export interface LeaseOptions {
  /**
   * How long a block may be spent before its unused units go back to the store. Longer blocks
   * mean fewer store calls; for buckets and GCRA it is also how far a block may stretch the
   * limit's bound in time (see docs/leasing.md).
   * @default windowMs / 10, between 10 ms and 1 s
   */
  blockMs?: Duration;
  /**
   * The most keys holding blocks in this process: to open another, an idle one is dropped (its
   * units given back); when every one is busy with a take, the new key is decided per decision.
   * @default 10_000
   */
  maxKeys?: number;
}

/** {@link LeaseOptions}, checked. */
export interface ResolvedLease {
  readonly blockMs: number;
  readonly maxKeys: number;
}

/**
 * Checks the `lease` option against the limits. Leasing needs one limit of an algorithm whose
 * bound survives local spending (fixed window, token bucket, leaky bucket as a meter, GCRA).
 * Adds issues naming `lease`; returns undefined when leasing is off or bad.
 */
export function resolveLease(value: unknown, limits: readonly ResolvedLimit[], issues: ConfigIssue[]): ResolvedLease | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && !isPlainObject(value)) {
    issues.push({ path: "lease", message: `must be true, false or { blockMs, maxKeys } (got ${describeValue(value)})` });
    return undefined;
  }
  const o = (value === true ? {} : value) as Record<string, unknown>;
  const before = issues.length;
  for (const k of Object.keys(o)) {
    if (k !== "blockMs" && k !== "maxKeys" && o[k] !== undefined)
      issues.push({ path: `lease.${k}`, message: "unknown option (known: blockMs, maxKeys)" });
  }
  if (limits.length !== 1) {
    issues.push({ path: "lease", message: "works with one limit per limiter: give each limit its own leased limiter" });
  }
  const lim = limits[0];
  if (lim !== undefined && !leasable(lim)) {
    issues.push({
      path: "lease",
      message:
        `cannot hold the bound of "${lim.algorithm}"${lim.shape ? ' mode "shape"' : ""} with local spending ` +
        "(a unit spent later than taken would count in the wrong window or queue): use fixed-window, token-bucket, leaky-bucket (police) or gcra",
    });
  }
  let blockMs = Math.min(1000, Math.max(10, Math.ceil((lim?.windowMs ?? 1000) / 10)));
  if (o.blockMs !== undefined) {
    try {
      blockMs = parseDuration(o.blockMs, "lease.blockMs");
    } catch {
      issues.push({
        path: "lease.blockMs",
        message: `must be a positive duration such as 100 or "200ms" (got ${describeValue(o.blockMs)})`,
      });
    }
  }
  const maxKeys = o.maxKeys === undefined ? 10_000 : o.maxKeys; // null is refused, as everywhere
  if (typeof maxKeys !== "number" || !Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    issues.push({ path: "lease.maxKeys", message: `must be a whole number >= 1 (got ${describeValue(o.maxKeys)})` });
  }
  if (issues.length > before) return undefined;
  return { blockMs, maxKeys: maxKeys as number };
}
