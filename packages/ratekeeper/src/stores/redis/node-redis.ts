import type { RedisShim } from "./client.js";
import { retryTryAgain } from "./try-again.js";

/** The part of a node-redis (`redis` package, v4 and later) client or cluster the store uses. */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
  /** Whether the client is connected and ready for commands (node-redis v4+). */
  readonly isReady?: boolean;
}

/**
 * node-redis: options objects; a cluster routes by the first of `keys`. On a cluster, a call
 * refused with TRYAGAIN (its slot's keys split by a migration) is made again, as ioredis does
 * (try-again.ts); node-redis follows MOVED and ASK itself.
 */
export function nodeRedisShim(client: NodeRedisLike): RedisShim {
  let wasReady = false;
  // Only a cluster (createCluster) knows its masters.
  const isCluster = typeof (client as unknown as { getMasters?: unknown }).getMasters === "function";
  const shim: RedisShim = {
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
    eval: (script, keys, args) => client.eval(script, { keys, arguments: args }),
    del: (keys) => client.del(keys),
    isCluster,
    lost() {
      if (client.isReady === undefined) return false;
      if (client.isReady) wasReady = true;
      return wasReady && !client.isReady;
    },
  };
  if (!isCluster) return shim;
  return {
    ...shim,
    evalsha: (sha, keys, args) => retryTryAgain(() => client.evalSha(sha, { keys, arguments: args })),
    eval: (script, keys, args) => retryTryAgain(() => client.eval(script, { keys, arguments: args })),
    del: (keys) => retryTryAgain(() => client.del(keys)),
  };
}
