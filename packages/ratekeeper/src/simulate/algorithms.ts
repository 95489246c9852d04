import type { AlgorithmName, LimitSpec, ResolvedLimit } from "../core/options.js";

type WithoutLimit<S> = S extends LimitSpec ? Omit<S, "limit" | "window" | "name"> : never;

/**
 * An algorithm to simulate, with its options but without `limit` and `window`: every algorithm
 * in one simulation gets the same ones.
 * @example { algorithm: "gcra", burst: 9 }
 */
export type AlgorithmChoice = WithoutLimit<LimitSpec>;

/**
 * The algorithms simulated when none are named: each with its defaults, except the leaky bucket
 * as a queue (`mode: "shape"`), since as a meter it decides exactly like the token bucket.
 */
export const DEFAULT_ALGORITHMS: readonly AlgorithmChoice[] = [
  { algorithm: "fixed-window" },
  { algorithm: "sliding-window" },
  { algorithm: "sliding-log" },
  { algorithm: "token-bucket" },
  { algorithm: "leaky-bucket", mode: "shape" },
  { algorithm: "gcra" },
];

const SPEC_COMMON = new Set(["algorithm", "limit", "window", "name"]);

/**
 * A short label: the algorithm and the options that differ from its defaults.
 * @example algorithmLabel({ algorithm: "gcra", burst: 9 }) // "gcra burst=9"
 */
export function algorithmLabel(choice: AlgorithmChoice): string {
  const opts = Object.entries(choice)
    .filter(([k, v]) => v !== undefined && !SPEC_COMMON.has(k))
    .map(([k, v]) => `${k}=${String(v)}`);
  return [choice.algorithm, ...opts].join(" ");
}

/** What the charted state of each algorithm is (see {@link stateReading}). */
export const STATE_LABELS: Readonly<Record<AlgorithmName, string>> = {
  "fixed-window": "count in the current window",
  "sliding-window": "count in the sliding window",
  "sliding-log": "log entries inside the window",
  "token-bucket": "tokens in the bucket",
  "leaky-bucket": "bucket level (requests queued)",
  gcra: "cells in use (of burst + 1)",
};

/**
 * The state of a key in the terms each algorithm is explained in, from the units it could admit
 * now (`free`): a token bucket holds `free` tokens; every other algorithm has used
 * `capacity - free` of its room (the counter, the log, the bucket level, the cells).
 */
export function stateReading(lim: ResolvedLimit, free: number): number {
  return lim.algorithm === "token-bucket" ? free : lim.capacity - free;
}

/** Bytes of limit state one key holds in the memory store's layout (two numbers, plus the ring of the log or the sub-windows). */
export function stateBytes(lim: ResolvedLimit): number {
  if (lim.algorithm === "sliding-log") return 16 + 8 * lim.limit;
  if (lim.algorithm === "sliding-window") return 16 + 8 * (lim.buckets + 1);
  return 16;
}
