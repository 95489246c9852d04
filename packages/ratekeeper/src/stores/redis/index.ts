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
import { describeAs } from "../../core/describe.js";
import { RedisStore } from "./store.js";

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

// console.log(store) and JSON.stringify: the settings and the breaker, not the client or the tables.
describeAs(RedisStore, "RedisStore", (s) => ({
  prefix: s.prefix,
  timeoutMs: s.timeoutMs,
  failure: typeof s.failure === "string" ? s.failure : { insurance: s.failure.insurance },
  state: s.state,
}));
