/**
 * How much time and heap one rules parse off the event loop (parse-thread.ts) gets. A rules file
 * is a trust boundary: within the byte cap (--max-rules-bytes, 4 MiB by default), a hostile or
 * broken file, such as a 4 MiB YAML flow list of two million numbers, would otherwise parse for
 * a minute and take gigabytes of heap. Both bounds scale with the byte cap, so an operator who
 * raises the cap for a legitimately larger file raises them too.
 *
 * Measured with 4 MiB of ordinary rules (one domain and descriptor per 100 bytes, as block YAML,
 * or as compact JSON) on 2 cores shared with a CI run (load average 4 to 7): 9 to 17 s to parse;
 * the parse ran out of heap with 256 MB and passed with 320 MB (YAML) or 384 MB (JSON).
 * Quiet, parsing takes about a second per MiB.
 */

/** The bounds of one parse. */
export interface ParseBudget {
  /** Time allowed, in ms: the worker is then stopped and the file refused. */
  readonly timeoutMs: number;
  /** The worker's old-generation heap, in MB (its `resourceLimits.maxOldGenerationSizeMb`). */
  readonly heapMb: number;
}

const MIB = 1024 * 1024;
/**
 * Per MiB of the byte cap: 20 s (80 s at 4 MiB, about 6 times the 12 s measured on the loaded
 * machine, so a slower machine under load still passes) and 256 MB (1 GB at 4 MiB, 3 times the
 * heap 4 MiB of ordinary rules needs; the two-million-number flow list runs out of it).
 */
const MS_PER_MIB = 20_000;
const HEAP_MB_PER_MIB = 256;
/** Floors for a small cap: a worker's start alone can take a second on a loaded machine. */
const MIN_MS = 30_000;
const MIN_HEAP_MB = 64;
/** The longest a Node timer waits (a longer delay fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The budget of a parse of a file of at most `maxBytes`.
 * @example parseBudget(4 * 1024 * 1024) // { timeoutMs: 80000, heapMb: 1024 }
 */
export function parseBudget(maxBytes: number): ParseBudget {
  const mib = maxBytes / MIB;
  return {
    timeoutMs: Math.min(MAX_TIMER_MS, Math.max(MIN_MS, Math.ceil(mib * MS_PER_MIB))),
    heapMb: Math.max(MIN_HEAP_MB, Math.ceil(mib * HEAP_MB_PER_MIB)),
  };
}
