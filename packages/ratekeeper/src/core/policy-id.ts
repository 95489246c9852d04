import type { ResolvedLimit } from "./options.js";

/**
 * A short, stable id for a set of limits, used as the default namespace (so as part of every
 * Redis key) and to name a MemoryStore's tables: servers running the same policy share state;
 * different policies never do.
 *
 * It is the policy itself, written compactly, not a hash: two different policies cannot share
 * an id (a 32-bit hash could be made to collide by a search of a few seconds, and colliding
 * policies then shared state). Per limit: the algorithm's index, then `limit` and `windowMs` in
 * base 36 separated by `.`; then, only where they differ from the algorithm's defaults, `C`
 * capacity, `B` buckets (base 36), `U` unweighted, `F` windows aligned on the first request.
 * Limits are joined by `_`. Base-36 digits are 0-9a-z and the markers are upper case, so the
 * text parses back unambiguously: distinct policies, distinct ids. Only what shapes the stored
 * state is included (not a limit's name, nor leaky-bucket `mode`, which changes only what is
 * reported).
 * @example policyId(resolveLimits([{ algorithm: "fixed-window", limit: 100, window: "1m" }])) // "0.2s.1aao"
 */
export function policyId(limits: readonly ResolvedLimit[]): string {
  let id = "";
  for (let i = 0; i < limits.length; i++) {
    const l = limits[i] as ResolvedLimit;
    id += `${i === 0 ? "" : "_"}${l.algorithmId}.${l.limit.toString(36)}.${l.windowMs.toString(36)}`;
    if (l.capacity !== l.limit) id += `C${l.capacity.toString(36)}`;
    if (l.buckets !== 1) id += `B${l.buckets.toString(36)}`;
    if (!l.weighted) id += "U";
    if (l.alignFirst) id += "F";
  }
  return id;
}
