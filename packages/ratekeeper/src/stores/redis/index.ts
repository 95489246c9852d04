/**
 * `ratekeeper/redis`: the Redis store. Exact across any number of app servers; one Lua script
 * call per decision. ioredis and node-redis are optional peers, detected by shape.
 * @example
 * import { Redis } from "ioredis";
 * import { RateLimiter } from "ratekeeper";
 * import { RedisStore } from "ratekeeper/redis";
 * const limiter = new RateLimiter({
 *   algorithm: "gcra", limit: 10, window: "1s", burst: 5,
 *   store: new RedisStore({ client: new Redis(process.env.REDIS_URL) }),
 * });
 */
export {
  RedisStore,
  type RedisStoreOptions,
  type RedisStoreStats,
  type RedisFailurePolicy,
  type RedisErrorContext,
  type BreakerState,
  type BreakerEvent,
} from "./store.js";
export type { RedisClientLike, IoRedisLike, NodeRedisLike } from "./client.js";
