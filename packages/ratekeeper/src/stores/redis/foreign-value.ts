import type { Pending } from "./batcher.js";

/**
 * A key of the store holding a value the store did not write (another program's list or hash
 * under our key name, a string in no layout of ours). ratekeeper.lua decides each decision of a
 * call under `pcall`: a decision on such a key writes nothing and replies a marker in its place,
 * `"<key>: <error>"`, so the other decisions of the batch are decided as usual (keyFault in the
 * script). The general layout puts the marker where the decision's first integer would be; the
 * fast path's batch ("B") replies `[marker]` (a one-element array) in place of the state.
 * Redis answered: the breaker counts it as a reply; that decision gets the failure policy and
 * `onError`, with {@link foreignValueError}.
 */

/**
 * The marker of a general reply's decision whose first entry is `first`, or undefined for a
 * decision (an integer; an HTTP client may hand one over as decimal text).
 */
export function foreignMarker(first: unknown): string | undefined {
  if (typeof first === "string") return /^-?\d+$/.test(first) ? undefined : first;
  return typeof Buffer !== "undefined" && Buffer.isBuffer(first) ? first.toString() : undefined;
}

/** The marker of a fast-path batch's reply element (`[marker]`), or undefined for a state. */
export function fastForeignMarker(raw: unknown): string | undefined {
  return Array.isArray(raw) && raw.length === 1 ? foreignMarker(raw[0]) : undefined;
}

/**
 * The error of a decision on a key with a foreign value ({@link foreignValueError}): Redis answered,
 * and will refuse that key the same way until someone deletes it (charge.ts does not retry it).
 */
export class ForeignValueError extends Error {}

/** The error of a decision on a key with a foreign value: `detail` names the key and what Redis said; what to do. */
export function foreignValueError(detail: string): Error {
  return new ForeignValueError(
    `a key holds a value this store did not write (${detail}): delete that key, or give the limiter another namespace (its keys then start afresh); ` +
      `if this namespace was set by hand, a limiter of other options under it (another algorithm or sliding window's buckets) writes values this one cannot read`,
  );
}

/**
 * Gives decision `d` of a general reply (`width` entries each: 5 integers per limit) its slice,
 * or, for a foreign value's marker, the failure policy with {@link foreignValueError}.
 */
export function settleGeneral(p: Pending, reply: readonly unknown[], d: number, width: number): void {
  const bad = foreignMarker(reply[d * width]);
  if (bad === undefined) p.resolve(reply.slice(d * width, (d + 1) * width));
  else p.reject(foreignValueError(bad));
}
