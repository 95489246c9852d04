import type { AlgorithmName } from "../options.js";
import { bucket } from "./bucket.js";
import { fixedWindow } from "./fixed-window.js";
import { slidingLog } from "./sliding-log.js";
import { slidingWindow } from "./sliding-window.js";
import type { Algorithm } from "./types.js";

export type { Algorithm, LimitState } from "./types.js";

/**
 * Each algorithm name to its state machine. Token bucket, leaky bucket and GCRA share one
 * (see bucket.ts); their options (`capacity`, `mode`, `burst`) are resolved into the limit.
 */
export const ALGORITHM_IMPLS: Readonly<Record<AlgorithmName, Algorithm>> = {
  "fixed-window": fixedWindow,
  "sliding-log": slidingLog,
  "sliding-window": slidingWindow,
  "token-bucket": bucket,
  "leaky-bucket": bucket,
  gcra: bucket,
};
