import { describeValue, RateLimitConfigError, unknownOptions, type ConfigIssue, type RateLimitStoreError } from "../../core/errors.js";
import type { Store } from "../../store.js";
import { MemoryStore } from "../memory.js";
import { DEFAULT_MIN_TTL_MS } from "../redis/script-format.js";
import { isPlainObject } from "../../core/plain-object.js";

/**
 * A Redis client that speaks HTTP, as on the edge (Cloudflare Workers, Vercel Edge, Deno Deploy),
 * where a TCP client such as ioredis cannot run: `@upstash/redis` (and what wraps it, such as
 * `@vercel/kv`), or any object with these two methods. The store never imports a client library.
 */
export interface HttpRedisClientLike {
  /** `EVAL script numkeys keys... args...`, resolving to the script's reply. */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /** `EVALSHA sha numkeys keys... args...`; rejects with an error whose message has `NOSCRIPT` when the server lacks the script. */
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
}

/**
 * What an {@link HttpRedisStore} answers when Redis fails (an error, or no reply within
 * `timeoutMs`):
 * - `{ insurance }` (default: a `MemoryStore` of at most {@link DEFAULT_INSURANCE} keys and
 *   bytes, made per HttpRedisStore): decide with this store at the full limit, per isolate or
 *   process (`reason: "insurance"`); nothing is reconciled. A client hammering one isolate is
 *   still limited there while Redis is away; requests are served, not refused, for the outage.
 * - `"open"`: admit (`reason: "store-error"`): no limit at all while Redis is away.
 * - `"closed"`: deny (`reason: "store-error"`, `retryAfterMs: 1000`).
 * - `"throw"`: reject with a `RateLimitStoreError` (its `cause` is the client's error).
 * There is no `"degraded"` as in `RedisStore`: an edge deployment cannot count its instances
 * (isolates come and go by the request), so `limit / N` has no N.
 */
export type HttpRedisFailurePolicy = "open" | "closed" | "throw" | { insurance: Store };

/**
 * The bounds of the default insurance store: an isolate has little memory (128 MB on Cloudflare
 * Workers), and the store holds only what an outage's traffic brings.
 */
export const DEFAULT_INSURANCE = { maxKeys: 50_000, maxBytes: 8 * 1024 * 1024 } as const;

/** What failed, for {@link HttpRedisStoreOptions.onError}. */
export interface HttpRedisErrorContext {
  readonly op: "consume" | "peek" | "refund" | "reset";
  /** The limiter's key (without prefix and namespace). */
  readonly key: string;
  /** Whether the reply did not come within `timeoutMs` (else the client reported an error). */
  readonly timedOut: boolean;
}

/** Options of {@link HttpRedisStore}. */
export interface HttpRedisStoreOptions {
  /** An `@upstash/redis` `Redis` (or any {@link HttpRedisClientLike}). */
  client: HttpRedisClientLike;
  /** Prepended to every key; the same keys as `RedisStore` with the same prefix. @default "rk:" */
  prefix?: string;
  /**
   * How long a call may wait for its reply before the failure policy answers it, in ms; `0`
   * waits as long as the client does (`@upstash/redis` retries a failed fetch 5 times by default,
   * about 4 s). A reply that comes later and admitted is given back (refunded). More than
   * 2^31 - 1 ms (about 24.8 days, what a timer holds) waits that long.
   * @default 1000
   */
  timeoutMs?: number;
  /** What answers when Redis fails. @default { insurance: new MemoryStore(DEFAULT_INSURANCE) } */
  failure?: HttpRedisFailurePolicy;
  /**
   * Called with every failure (errors and timeouts), wrapped in a `RateLimitStoreError` whose
   * `cause` is the original error. Exceptions thrown by it are swallowed.
   */
  onError?: (error: RateLimitStoreError, context: HttpRedisErrorContext) => void;
  /** The least TTL (ms) given to a written key, as in `RedisStore` (which says why). @default 5000 */
  minTtlMs?: number;
}

/** {@link HttpRedisStoreOptions}, checked, with defaults applied. */
export interface ResolvedHttpRedisOptions {
  readonly client: HttpRedisClientLike;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly failure: HttpRedisFailurePolicy;
  readonly onError: HttpRedisStoreOptions["onError"];
  readonly minTtlMs: number;
}

const KNOWN = ["client", "prefix", "timeoutMs", "failure", "onError", "minTtlMs"];

/**
 * Checks an HttpRedisStore's options.
 * @throws RateLimitConfigError naming every bad option and what to do
 */
export function resolveHttpRedisOptions(options: HttpRedisStoreOptions): ResolvedHttpRedisOptions {
  if (!isPlainObject(options)) {
    throw new RateLimitConfigError([{ path: "options", message: `must be an object with a client (got ${describeValue(options)})` }]);
  }
  const issues: ConfigIssue[] = [];
  unknownOptions(options, KNOWN, issues);
  checkClient(options.client, issues);
  const prefix = options.prefix ?? "rk:";
  if (typeof prefix !== "string" || prefix.includes("{") || prefix.includes("}")) {
    issues.push({ path: "prefix", message: `must be a string without "{" or "}" (got ${describeValue(options.prefix)})` });
  }
  const timeoutMs = whole(options.timeoutMs, 1000, "timeoutMs", "a whole number of ms >= 0 (0: no timeout)", issues);
  // Kept limiting by default: a store of its own for each HttpRedisStore (no timer until its first key).
  const failure = options.failure ?? { insurance: new MemoryStore(DEFAULT_INSURANCE) };
  if (!isPolicy(failure)) {
    issues.push({
      path: "failure",
      message:
        failure === "degraded"
          ? `"degraded" needs a count of instances, which an edge deployment does not have: use "open", "closed", "throw" or { insurance: new MemoryStore() }`
          : `must be "open", "closed", "throw" or { insurance: new MemoryStore() } (got ${describeValue(options.failure)})`,
    });
  }
  if (options.onError !== undefined && typeof options.onError !== "function") {
    issues.push({ path: "onError", message: `must be a function (got ${describeValue(options.onError)})` });
  }
  const minTtlMs = whole(options.minTtlMs, DEFAULT_MIN_TTL_MS, "minTtlMs", "a whole number of ms >= 0", issues);
  if (issues.length > 0) throw new RateLimitConfigError(issues, "HttpRedisStore");
  return { client: options.client, prefix, timeoutMs, failure, onError: options.onError, minTtlMs };
}

/** The client must have `eval` and `evalsha` taking arrays; TCP clients are sent to `RedisStore`. */
function checkClient(client: unknown, issues: ConfigIssue[]): void {
  const c = client as Record<string, unknown> | null;
  const tcp = c !== null && typeof c === "object" && (typeof c.evalSha === "function" || typeof c.defineCommand === "function");
  if (tcp) {
    issues.push({
      path: "client",
      message: "is an ioredis or node-redis client, which speak Redis's own protocol: use RedisStore from ratekeeper/redis for it",
    });
  } else if (c === null || typeof c !== "object" || typeof c.eval !== "function" || typeof c.evalsha !== "function") {
    issues.push({
      path: "client",
      message: `must be an @upstash/redis Redis (or an object with eval(script, keys, args) and evalsha(sha, keys, args)) (got ${describeValue(client)})`,
    });
  }
}

function isPolicy(f: unknown): f is HttpRedisFailurePolicy {
  if (f === "open" || f === "closed" || f === "throw") return true;
  const insurance = typeof f === "object" && f !== null ? (f as { insurance?: unknown }).insurance : undefined;
  return typeof insurance === "object" && insurance !== null && typeof (insurance as Store).bind === "function";
}

function whole(v: unknown, fallback: number, path: string, what: string, issues: ConfigIssue[]): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    issues.push({ path, message: `must be ${what} (got ${describeValue(v)})` });
    return fallback;
  }
  return v;
}
