/**
 * `ratekeeper/redis-http`: the Redis store for HTTP Redis clients (`@upstash/redis`), for edge
 * runtimes where TCP clients cannot run. Same Lua scripts and keys as `ratekeeper/redis`; no Node
 * APIs, no timers outside a call. See docs/edge.md.
 * @example
 * import { Redis } from "@upstash/redis";
 * import { HttpRedisStore } from "ratekeeper/redis-http";
 * const store = new HttpRedisStore({ client: Redis.fromEnv() });
 */
import { describeAs } from "../../core/describe.js";
import { HttpRedisStore } from "./store.js";

export {
  HttpRedisStore,
  type HttpRedisStoreOptions,
  type HttpRedisFailurePolicy,
  type HttpRedisErrorContext,
  type HttpRedisClientLike,
} from "./store.js";

// console.log(store) and JSON.stringify: the settings, not the client.
describeAs(HttpRedisStore, "HttpRedisStore", (s) => ({
  prefix: s.prefix,
  timeoutMs: s.timeoutMs,
  failure: typeof s.failure === "string" ? s.failure : { insurance: s.failure.insurance },
}));
