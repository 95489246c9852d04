/**
 * Redis Cluster's TRYAGAIN: a call whose keys (one hash slot, several keys: the state keys of a
 * policy's limits, or a state key and its reset epoch) are split between two masters while that
 * slot migrates in a resharding. Redis ran nothing; the call succeeds once the migration has
 * moved the rest. ioredis's Cluster retries it itself (`retryDelayOnTryAgain`, 100 ms, up to
 * `maxRedirections`, 16 times); node-redis's cluster does not, and without this the store took
 * it for Redis failing: decisions answered by the failure policy, and the slot's breaker opened,
 * during a routine resharding. The same bounds as ioredis. A reply that comes after the lane's
 * watchdog gave up on the call is handled as any late reply (breakers.ts `onLate`).
 */
const DELAY_MS = 100;
const ATTEMPTS = 16;

/** Whether a Redis error is TRYAGAIN. */
export function isTryAgain(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith("TRYAGAIN");
}

/** `call()`, made again after {@link DELAY_MS} while it fails with TRYAGAIN, at most {@link ATTEMPTS} more times. */
export function retryTryAgain<T>(call: () => Promise<T>, attempt = 0): Promise<T> {
  return call().catch((e: unknown) => {
    if (attempt >= ATTEMPTS || !isTryAgain(e)) throw e;
    return new Promise<T>((resolve, reject) => {
      setTimeout(() => {
        retryTryAgain(call, attempt + 1).then(resolve, reject);
      }, DELAY_MS);
    });
  });
}
