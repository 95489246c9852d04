/**
 * The bound on {@link RedisStore.close}: a shutdown must not hang on a Redis that went silent
 * (with `timeoutMs: 0` no watchdog ever gives up on a frozen server's calls).
 */

/**
 * How long RedisStore.close() waits at most for its give-backs and the instance registry's leave
 * (ms): a few round trips on a busy Redis, short enough for a shutdown's grace period.
 */
export const CLOSE_WAIT_MS = 2_000;

/** Resolves when `work` settles (rejecting as it does) or after `ms`, whichever comes first; leaves no timer behind. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}
