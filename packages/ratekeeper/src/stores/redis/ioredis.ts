import type { RedisShim } from "./client.js";

/** The part of ioredis `Redis` and `Cluster` the store uses (no import of ioredis). */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<unknown>;
  /** true on a `Cluster`. */
  readonly isCluster?: boolean;
}

/** ioredis: positional arguments; a Cluster routes EVALSHA by its first key. */
export function ioredisShim(client: IoRedisLike): RedisShim {
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
    del: (keys) => client.del(...keys),
    isCluster: client.isCluster === true,
  };
}
