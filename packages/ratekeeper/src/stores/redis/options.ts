import {
  collectIssues,
  describeValue,
  RateLimitConfigError,
  unknownOptions,
  type ConfigIssue,
  type RateLimitStoreError,
} from "../../core/errors.js";
import type { Store } from "../../store.js";
import { shimFor, type RedisClientLike, type RedisShim } from "./client.js";
import { DEFAULT_MIN_TTL_MS } from "./script-format.js";
import { isPlainObject } from "../../core/plain-object.js";

/**
 * What a {@link RedisStore} answers while Redis is down (unreachable, or silent for `timeoutMs`
 * while it has calls outstanding). It never applies because the local process is slow: only the
 * time Redis itself takes counts.
 * - `"degraded"` (default): each process keeps limiting on its own, at `limit / N` per key, where
 *   N is the number of live instances (`instances`, or the count the stores keep in Redis); what
 *   it admits is charged to Redis when Redis answers again. `reason: "degraded"`.
 * - `"open"`: admit (`reason: "store-error"`).
 * - `"closed"`: deny (`reason: "store-error"`, `retryAfterMs: 1000`).
 * - `"throw"`: reject the call with a `RateLimitStoreError` (its `cause` is the Redis error).
 * - `{ insurance }`: decide with this store (normally a `MemoryStore`) at the full limit, per
 *   process (`reason: "insurance"`); nothing is reconciled.
 */
export type RedisFailurePolicy = "degraded" | "open" | "closed" | "throw" | { insurance: Store };

/** What failed, for {@link RedisStoreOptions.onError}. */
export interface RedisErrorContext {
  readonly op: "consume" | "peek" | "refund" | "reset" | "reconcile" | "heartbeat" | "acquire" | "renew" | "release" | "count" | "lease";
  /** The limiter's key (without prefix and namespace); empty for store-wide calls. */
  readonly key: string;
  /** Whether Redis stayed silent for `timeoutMs` (else Redis or the client reported an error). */
  readonly timedOut: boolean;
}

/** The circuit breaker's states: `closed` (Redis answers), `open` (down: the policy answers at once), `half-open` (probing). */
export type BreakerState = "closed" | "open" | "half-open";

/** A change of the breaker's state, for {@link RedisStoreOptions.onStateChange}. */
export interface BreakerEvent {
  readonly from: BreakerState;
  readonly to: BreakerState;
  /** What caused it: a timeout, an error's message, or a probe that succeeded. */
  readonly cause: string;
}

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster`, or a node-redis client or cluster (already connecting).
   * The store never closes it.
   */
  client: RedisClientLike;
  /** Prepended to every key. @default "rk:" */
  prefix?: string;
  /**
   * How long Redis may stay silent while calls wait for it before the failure policy answers
   * them, in ms. It measures Redis, not this process: a call is only timed out when no reply at
   * all has arrived on its connection (its hash slot, on a cluster) for this long, checked after
   * the process has read what is waiting on its sockets, so a busy event loop or a local backlog
   * never counts. A connection the client reports lost (ioredis reconnecting, node-redis not
   * ready) opens the breaker at once, without waiting. `0`: no timeout (wait as long as the
   * client does). The default is about 3 times the longest silence measured from a healthy Redis
   * on a 2-core machine with every core saturated and hundreds of calls waiting (docs/redis.md).
   * @default 1000
   */
  timeoutMs?: number;
  /** What answers while Redis is down. @default "degraded" */
  failure?: RedisFailurePolicy;
  /**
   * For `"degraded"`: how many instances share the limits (each limits at `limit / instances`).
   * Unset: the count of live RedisStores with this prefix, which each keeps in Redis from its
   * first use on, with a heartbeat every 5 s (a sorted set `<prefix>instances`, entries expiring
   * after 3 heartbeats; `close()` removes this one's).
   * @default the live count (1 until it is first known)
   */
  instances?: number;
  /**
   * The most decisions this store holds waiting for Redis (queued for a batch, or sent and not yet
   * answered; with quota leasing, waiting for a block). Past it a decision is denied at once
   * (`reason: "overloaded"`, `retryAfterMs: 1000`) instead of growing the backlog: backpressure,
   * never an admission.
   * @default 10000
   */
  maxPending?: number;
  /**
   * Called with every Redis failure (errors and timeouts), wrapped in a `RateLimitStoreError`
   * whose `cause` is the original error. Exceptions thrown by it are swallowed.
   */
  onError?: (error: RateLimitStoreError, context: RedisErrorContext) => void;
  /** Called on every change of the circuit breaker's state. Exceptions thrown by it are swallowed. */
  onStateChange?: (event: BreakerEvent) => void;
  /**
   * Called with the time each Redis call took, from sending it to its reply (ms, fractional),
   * and how many decisions it carried (a batch carries several): for a latency histogram.
   */
  onRoundTrip?: (ms: number, decisions: number) => void;
  /**
   * Remember denials locally: a key denied with `retryAfterMs = R` is denied again without a
   * Redis call (`reason: "denial-cache"`) until R has passed, for requests costing at least as
   * much. Bounded by `maxKeys` (oldest entries dropped first). Per process: a refund or reset on
   * another server is not seen until R passes.
   * @default false
   */
  denialCache?: boolean | { maxKeys?: number };
  /**
   * Send the decisions that wait while earlier ones are in flight together, in one script call
   * (each still atomic and all-or-nothing; order kept). At most 2 calls in flight per limiter,
   * each carrying up to `maxBatch` decisions. On a cluster, per hash slot (a script call may
   * touch one slot only): decisions on one hot key go together, others go out at once.
   * @default true
   */
  batch?: boolean | { maxBatch?: number };
  /**
   * The least TTL (ms) given to a written key. The default keeps a key 5 s past the end of its
   * state's relevance, so that a decision whose time reading lags Redis (it waited in a queue, or
   * came from a server whose clock is behind) is still charged to its window; a longer TTL never
   * changes a decision. Raise it with an injected clock that runs slower than real time (replays,
   * tests with a manual clock); 0 makes the TTL exactly resetAfterMs (fewest live keys, exact only
   * while no decision lags).
   * @default 5000
   */
  minTtlMs?: number;
}

/** {@link RedisStoreOptions}, checked, with defaults applied. */
export interface ResolvedRedisOptions {
  readonly shim: RedisShim;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly failure: RedisFailurePolicy;
  /** 0: from the heartbeat registry. */
  readonly instances: number;
  readonly maxPending: number;
  readonly onError: RedisStoreOptions["onError"];
  readonly onStateChange: RedisStoreOptions["onStateChange"];
  readonly onRoundTrip: RedisStoreOptions["onRoundTrip"];
  /** 0: no denial cache. */
  readonly denialMaxKeys: number;
  /** 0: no batching. */
  readonly maxBatch: number;
  readonly minTtlMs: number;
}

const KNOWN = [
  "client",
  "prefix",
  "timeoutMs",
  "failure",
  "instances",
  "maxPending",
  "onError",
  "onStateChange",
  "onRoundTrip",
  "denialCache",
  "batch",
  "minTtlMs",
];

/**
 * Checks a RedisStore's options.
 * @throws RateLimitConfigError naming every bad option and what to do
 */
export function resolveRedisOptions(options: RedisStoreOptions): ResolvedRedisOptions {
  if (!isPlainObject(options)) {
    throw new RateLimitConfigError([{ path: "options", message: `must be an object with a client (got ${describeValue(options)})` }]);
  }
  const issues: ConfigIssue[] = [];
  unknownOptions(options, KNOWN, issues);
  const shim = collectIssues(issues, () => shimFor(options.client));
  const prefix = options.prefix ?? "rk:";
  if (typeof prefix !== "string" || prefix.includes("{") || prefix.includes("}")) {
    issues.push({ path: "prefix", message: `must be a string without "{" or "}" (got ${describeValue(options.prefix)})` });
  }
  const timeoutMs = wholeAtLeast(options.timeoutMs, 1000, 0, "timeoutMs", "a whole number of ms >= 0 (0: no timeout)", issues);
  const failure = options.failure ?? "degraded";
  if (!isFailurePolicy(failure)) {
    issues.push({
      path: "failure",
      message: `must be "degraded", "open", "closed", "throw" or { insurance: new MemoryStore() } (got ${describeValue(options.failure)})`,
    });
  }
  const instances = wholeAtLeast(
    options.instances,
    0,
    1,
    "instances",
    "a whole number >= 1 (or leave it out to count live instances)",
    issues,
  );
  const maxPending = wholeAtLeast(options.maxPending, 10_000, 1, "maxPending", "a whole number >= 1", issues);
  for (const k of ["onError", "onStateChange", "onRoundTrip"] as const) {
    if (options[k] !== undefined && typeof options[k] !== "function") {
      issues.push({ path: k, message: `must be a function (got ${describeValue(options[k])})` });
    }
  }
  const denialMaxKeys = denialCacheSize(options.denialCache, issues);
  const maxBatch = batchSize(options.batch, issues);
  const minTtlMs = wholeAtLeast(options.minTtlMs, DEFAULT_MIN_TTL_MS, 0, "minTtlMs", "a whole number of ms >= 0", issues);
  if (issues.length > 0 || shim === undefined) throw new RateLimitConfigError(issues, "RedisStore");
  const { onError, onStateChange, onRoundTrip } = options;
  return {
    shim,
    prefix,
    timeoutMs,
    failure,
    instances,
    maxPending,
    onError,
    onStateChange,
    onRoundTrip,
    denialMaxKeys,
    maxBatch,
    minTtlMs,
  };
}

function isFailurePolicy(f: unknown): f is RedisFailurePolicy {
  if (f === "degraded" || f === "open" || f === "closed" || f === "throw") return true;
  const insurance = typeof f === "object" && f !== null ? (f as { insurance?: unknown }).insurance : undefined;
  return typeof insurance === "object" && insurance !== null && typeof (insurance as Store).bind === "function";
}

/** An optional whole-number option: `fallback` when absent; an issue when below `min`. */
function wholeAtLeast(v: unknown, fallback: number, min: number, path: string, what: string, issues: ConfigIssue[]): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) {
    issues.push({ path, message: `must be ${what} (got ${describeValue(v)})` });
    return fallback;
  }
  return v;
}

function denialCacheSize(dc: RedisStoreOptions["denialCache"], issues: ConfigIssue[]): number {
  if (dc === undefined || dc === false) return 0;
  if (dc === true) return 10_000;
  if (isPlainObject(dc)) {
    return wholeAtLeast(dc.maxKeys, 10_000, 1, "denialCache.maxKeys", "a whole number >= 1", issues);
  }
  issues.push({ path: "denialCache", message: `must be true, false or { maxKeys } (got ${describeValue(dc)})` });
  return 0;
}

function batchSize(bo: RedisStoreOptions["batch"], issues: ConfigIssue[]): number {
  const b = bo ?? true;
  let maxBatch = 0;
  if (b === true) maxBatch = 128;
  else if (isPlainObject(b)) {
    maxBatch = b.maxBatch ?? 128;
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1 || maxBatch > 10_000) {
      issues.push({ path: "batch.maxBatch", message: `must be a whole number from 1 to 10000 (got ${describeValue(b.maxBatch)})` });
    }
  } else if (b !== false) {
    issues.push({ path: "batch", message: `must be true, false or { maxBatch } (got ${describeValue(b)})` });
  }
  return maxBatch;
}
