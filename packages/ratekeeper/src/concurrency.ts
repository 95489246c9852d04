import { parseDuration, type Duration } from "./core/duration.js";
import { collectIssues, describeValue, RateLimitConfigError, unknownOptions, type ConfigIssue } from "./core/errors.js";
import type { LeaseReason } from "./core/lease-reason.js";
import { checkKey } from "./key.js";
import { MemoryStore } from "./stores/memory.js";
import type { BoundLeases, LeaseAnswer, Store } from "./store.js";
import { isPlainObject } from "./core/plain-object.js";
import { describeAs } from "./core/describe.js";

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** The most leases held at once per key, over every process sharing the store. */
  limit: number;
  /**
   * How long a lease lives without a renew: it expires this long after it was acquired or last
   * renewed, so the slots of a holder that crashed come back by themselves. Longer than the work
   * it guards (or renew it while the work runs). Milliseconds, or `"30s"`, `"5m"`...
   * @default 30_000
   */
  leaseMs?: Duration;
  /** Where leases live: a `MemoryStore` (one process) or a `RedisStore` (every process sharing it). @default a new `MemoryStore()` */
  store?: Store;
  /** Milliseconds since the epoch, for tests and replays; by default the store's own time (Redis's clock for Redis). */
  clock?: () => number;
  /**
   * Separates concurrency limits that share a store and keys. By default `c.<limit>`: limiters
   * with the same limit share leases, as rate limiters with the same policy share state.
   */
  namespace?: string;
}

/** What {@link ConcurrencyLimiter.acquire} gives: a slot, or why not; and the means to give it back. */
export interface Lease {
  /** Whether a slot was taken: only then may the work proceed. */
  readonly acquired: boolean;
  /** The limit that decided. */
  readonly limit: number;
  /** Slots still free after this acquire (0 when refused). */
  readonly remaining: number;
  /**
   * 0 when acquired; otherwise ms until the earliest lease held expires, when a slot frees even if
   * nobody releases one (a release may free one sooner).
   */
  readonly retryAfterMs: number;
  /** Set when refused (`"limit"`), or when the store's failure policy answered (`"degraded"`, `"store-error"`...). */
  readonly reason: LeaseReason | undefined;
  /** The key the lease is on. */
  readonly key: string;
  /** The lease's id: unique over every process; `""` when not acquired. */
  readonly id: string;
  /** Gives the slot back. Idempotent: later calls (and a call on a refused lease) do nothing. */
  release(): Promise<void>;
  /**
   * Extends the lease to `leaseMs` from now. Resolves `false` when it was no longer held (it
   * expired, or was released): its slot may be someone else's, so stop the work or acquire again.
   * While the store's Redis is down, the failure policy answers (see docs/concurrency.md).
   */
  renew(): Promise<boolean>;
}

/** What {@link ConcurrencyLimiter.peek} says about a key now. */
export interface LeaseCount {
  /** Slots free now. */
  readonly remaining: number;
  /** 0 when a slot is free; otherwise ms until the earliest lease held expires. */
  readonly retryAfterMs: number;
  /** Set when the store's failure policy answered. */
  readonly reason: LeaseReason | undefined;
}

const KNOWN = ["limit", "leaseMs", "store", "clock", "namespace"];

/**
 * At most `limit` holders of a key at once, across every process sharing the store: in-flight
 * requests per tenant, parallel jobs, LLM calls, uploads. Each holder takes a lease; a lease not
 * released or renewed expires `leaseMs` after it was last acquired or renewed, so a holder that
 * crashed never holds its slot forever. On Redis, one script call per acquire, renew or release.
 * @example
 * const pool = new ConcurrencyLimiter({ limit: 10, leaseMs: 30_000, store });
 * const lease = await pool.acquire("tenant:7");
 * if (lease.acquired) { try { await work(); } finally { await lease.release(); } }
 * else res.status(429).set("Retry-After", String(Math.ceil(lease.retryAfterMs / 1000)));
 */
export class ConcurrencyLimiter {
  readonly limit: number;
  readonly leaseMs: number;
  readonly store: Store;
  readonly namespace: string;
  private readonly bound: BoundLeases;
  private readonly clock: (() => number) | undefined;

  constructor(options: ConcurrencyLimiterOptions) {
    if (!isPlainObject(options)) {
      throw new RateLimitConfigError([{ path: "options", message: `must be an object with a limit (got ${describeValue(options)})` }]);
    }
    const issues: ConfigIssue[] = [];
    unknownOptions(options, KNOWN, issues);
    const limit = options.limit;
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit <= 0 || limit > 1_000_000) {
      issues.push({ path: "limit", message: `must be a whole number of leases from 1 to 1000000 (got ${describeValue(limit)})` });
    }
    const leaseMs = collectIssues(issues, () => parseDuration(options.leaseMs ?? 30_000, "leaseMs")) ?? 0;
    const store = options.store ?? new MemoryStore();
    if (typeof store !== "object" || store === null || typeof store.bindLeases !== "function") {
      issues.push({
        path: "store",
        message: `must be a store that holds leases, such as new MemoryStore() or new RedisStore({ client }) (got ${describeValue(store)})`,
      });
    }
    if (options.clock !== undefined && typeof options.clock !== "function") {
      issues.push({
        path: "clock",
        message: `must be a function returning milliseconds since the epoch (got ${describeValue(options.clock)})`,
      });
    }
    const ns = options.namespace;
    if (ns !== undefined && (typeof ns !== "string" || ns.length === 0 || ns.length > 64)) {
      issues.push({ path: "namespace", message: `must be a string of 1-64 characters (got ${describeValue(ns)})` });
    }
    if (issues.length > 0) throw new RateLimitConfigError(issues, "ConcurrencyLimiter");
    this.limit = limit;
    this.leaseMs = leaseMs;
    this.store = store;
    this.namespace = ns ?? `c.${limit.toString(36)}`;
    this.clock = options.clock;
    const bindLeases = (store.bindLeases as NonNullable<Store["bindLeases"]>).bind(store);
    this.bound = this.clock === undefined ? bindLeases(limit, this.namespace) : bindLeases(limit, this.namespace, { injectedClock: true });
  }

  /**
   * Takes a slot of `key` when one is free. Never throws for a full key: the lease says
   * `acquired: false` with `retryAfterMs`.
   * @throws RangeError (as a rejected promise) when `key` is bad
   */
  async acquire(key: string): Promise<Lease> {
    checkKey(key);
    const id = newLeaseId();
    const a = await this.bound.acquire(key, id, this.leaseMs, this.now());
    return new HeldLease(this, key, a.ok ? id : "", a);
  }

  /** What an acquire of `key` would say now, taking nothing. */
  async peek(key: string): Promise<LeaseCount> {
    checkKey(key);
    const a = await this.bound.count(key, this.now());
    return { remaining: a.remaining, retryAfterMs: a.retryAfterMs, reason: a.reason };
  }

  /**
   * Renews the lease `id` on `key` by its id, for a holder that kept only the id (a client of
   * the decision service, another process): as {@link Lease.renew}.
   * @returns false when the lease was no longer held
   */
  async renew(key: string, id: string): Promise<boolean> {
    checkKey(key);
    checkLeaseId(id);
    return (await this.bound.renew(key, id, this.leaseMs, this.now())).ok;
  }

  /**
   * Gives back the lease `id` on `key` by its id: as {@link Lease.release} (idempotent).
   * @returns whether the lease was held until now (false: already released or expired)
   */
  async release(key: string, id: string): Promise<boolean> {
    checkKey(key);
    checkLeaseId(id);
    return (await this.bound.release(key, id, this.now(), this.leaseMs)).ok;
  }

  /** @internal */
  renewLease(key: string, id: string): LeaseAnswer | Promise<LeaseAnswer> {
    return this.bound.renew(key, id, this.leaseMs, this.now());
  }

  /** @internal */
  releaseLease(key: string, id: string): LeaseAnswer | Promise<LeaseAnswer> {
    return this.bound.release(key, id, this.now(), this.leaseMs);
  }

  private now(): number | undefined {
    if (this.clock === undefined) return undefined;
    const t = this.clock();
    if (!Number.isFinite(t)) throw new RangeError(`clock: must return finite milliseconds since the epoch (got ${describeValue(t)})`);
    return Math.floor(t);
  }
}

/** A lease id as {@link ConcurrencyLimiter.acquire} makes them (base64url, a dot): anything else cannot be held. */
const LEASE_ID = /^[A-Za-z0-9_-]{12,40}\.[A-Za-z0-9_-]{8}$/;

function checkLeaseId(id: string): void {
  if (typeof id !== "string" || !LEASE_ID.test(id)) {
    throw new RangeError(`lease id: must be the id of an acquired lease (got ${describeValue(id)})`);
  }
}

/** A lease handed to a caller: its answer, and release/renew bound to its limiter. */
class HeldLease implements Lease {
  readonly acquired: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterMs: number;
  readonly reason: LeaseReason | undefined;
  private released: Promise<void> | undefined;

  constructor(
    private readonly pool: ConcurrencyLimiter,
    readonly key: string,
    readonly id: string,
    a: LeaseAnswer,
  ) {
    this.acquired = a.ok;
    this.limit = pool.limit;
    this.remaining = a.remaining;
    this.retryAfterMs = a.retryAfterMs;
    this.reason = a.reason;
  }

  release(): Promise<void> {
    if (!this.acquired) return Promise.resolve();
    // A failed release (a store with failure "throw") may be tried again; a done one is not repeated.
    this.released ??= Promise.resolve(this.pool.releaseLease(this.key, this.id)).then(
      () => undefined,
      (e: unknown) => {
        this.released = undefined;
        throw e;
      },
    );
    return this.released;
  }

  async renew(): Promise<boolean> {
    if (!this.acquired || this.released !== undefined) return false;
    return (await this.pool.renewLease(this.key, this.id)).ok;
  }
}

describeAs(ConcurrencyLimiter, "ConcurrencyLimiter", (c) => ({
  limit: c.limit,
  leaseMs: c.leaseMs,
  namespace: c.namespace,
  store: c.store,
}));
describeAs(HeldLease, "Lease", (l) => ({
  acquired: l.acquired,
  key: l.key,
  id: l.id,
  limit: l.limit,
  remaining: l.remaining,
  retryAfterMs: l.retryAfterMs,
  reason: l.reason,
}));

/**
 * Lease ids: a random prefix per process (72 bits), a counter, and 48 random bits per lease, so
 * ids are unique over every process sharing a store, and a holder who knows its own id cannot
 * guess another's (a service that hands ids to clients lets them release only their own). The
 * random bits come from a pool refilled 4 KiB at a time: no crypto call per lease. The prefix is
 * drawn with the first lease, not when the module loads: Cloudflare Workers refuse random values
 * in a module's global scope (the Worker would not start).
 */
let prefix: string | undefined;
let counter = 0;
let pool: Uint8Array = new Uint8Array(0);
let at = 0;

function randomBytes(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  globalThis.crypto.getRandomValues(bytes);
  return bytes;
}

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_");
}

function newLeaseId(): string {
  if (at + 6 > pool.length) {
    pool = randomBytes(4096);
    at = 0;
  }
  at += 6;
  prefix ??= base64url(randomBytes(9));
  return `${prefix}${(++counter).toString(36)}.${base64url(pool.subarray(at - 6, at))}`;
}
