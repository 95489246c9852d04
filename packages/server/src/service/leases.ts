import { ConcurrencyLimiter, type Store } from "ratekeeper";
import type { ConcurrencyPool } from "../config/pools.js";
import type { Rules } from "../config/rules.js";
import { refusedKey } from "./store-call.js";
import { CheckError, StoreFailure } from "./types.js";

/** What `POST /v1/leases/acquire` answers. */
export interface LeaseGrant {
  readonly acquired: boolean;
  readonly pool: string;
  readonly key: string;
  /** The lease's id (present when acquired): renew and release with it. */
  readonly id?: string;
  readonly limit: number;
  readonly remaining: number;
  /** 0 when acquired; else ms until the earliest lease held expires. */
  readonly retryAfterMs: number;
  /** How long the lease lives without a renew. */
  readonly leaseMs: number;
  /** Set when refused (`limit`) or answered by the store's failure policy. */
  readonly reason?: string;
}

/** Keys and ids as the library takes them, checked here so a client gets a 400 naming the field. */
const MAX_KEY = 512;

/**
 * The service's concurrency limits: one {@link ConcurrencyLimiter} per pool of the rules file
 * (`concurrency:`), on the service's store, so every instance sharing a Redis shares the leases.
 * A pool's namespace is its name (`p.<name>`): a reload that changes its limit or lease keeps the
 * leases already held (the new limit applies to acquires from then on). The lease id is the
 * holder's proof: ids carry 48 random bits, so a client cannot release another's lease.
 */
export class LeaseService {
  /** Limiters by pool name, with the pool they were made for (remade when it changes). */
  private readonly limiters = new Map<string, { pool: ConcurrencyPool; limiter: ConcurrencyLimiter }>();

  constructor(
    private readonly store: Store,
    private readonly rules: () => Rules,
  ) {}

  async acquire(body: unknown): Promise<LeaseGrant> {
    const { pool, key } = this.input(body, false);
    const lease = await asCheck(this.store, this.limiter(pool).acquire(key), key);
    const grant: LeaseGrant = {
      acquired: lease.acquired,
      pool: pool.name,
      key,
      ...(lease.acquired ? { id: lease.id } : {}),
      limit: pool.limit,
      remaining: lease.remaining,
      retryAfterMs: lease.retryAfterMs,
      leaseMs: pool.leaseMs,
      ...(lease.reason === undefined ? {} : { reason: lease.reason }),
    };
    return grant;
  }

  /** Extends a lease to `leaseMs` from now; false when it was no longer held (stop the work). */
  async renew(body: unknown): Promise<boolean> {
    const { pool, key, id } = this.input(body, true);
    return asCheck(this.store, this.limiter(pool).renew(key, id as string), key, id);
  }

  /** Gives a lease back; false when it was not held (already released, or expired). Idempotent. */
  async release(body: unknown): Promise<boolean> {
    const { pool, key, id } = this.input(body, true);
    return asCheck(this.store, this.limiter(pool).release(key, id as string), key, id);
  }

  private limiter(pool: ConcurrencyPool): ConcurrencyLimiter {
    const had = this.limiters.get(pool.name);
    if (had !== undefined && had.pool.limit === pool.limit && had.pool.leaseMs === pool.leaseMs) return had.limiter;
    const limiter = new ConcurrencyLimiter({ limit: pool.limit, leaseMs: pool.leaseMs, store: this.store, namespace: `p.${pool.name}` });
    this.limiters.set(pool.name, { pool, limiter });
    return limiter;
  }

  /** The body's pool (which must be in the rules), key and, for renew and release, lease id. */
  private input(body: unknown, withId: boolean): { pool: ConcurrencyPool; key: string; id?: string } {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new CheckError(`body: must be a JSON object {"pool", "key"${withId ? ', "id"' : ""}}`);
    }
    const b = body as Record<string, unknown>;
    const known = withId ? ["pool", "key", "id"] : ["pool", "key"];
    for (const k of Object.keys(b)) if (!known.includes(k)) throw new CheckError(`${k}: unknown field (known: ${known.join(", ")})`);
    if (typeof b.pool !== "string") throw new CheckError("pool: must be the name of a pool under concurrency: in the rules file");
    const pool = this.rules().pools.get(b.pool);
    if (pool === undefined) {
      const names = [...this.rules().pools.keys()];
      throw new CheckError(
        `pool: no concurrency pool ${JSON.stringify(b.pool.slice(0, 64))} in the rules (${names.length > 0 ? `known: ${names.slice(0, 10).join(", ")}` : "the rules file has no concurrency: section"})`,
      );
    }
    if (typeof b.key !== "string" || b.key.length === 0 || b.key.length > MAX_KEY) {
      throw new CheckError(`key: must be a string of 1-${MAX_KEY} characters`);
    }
    if (!withId) return { pool, key: b.key };
    if (typeof b.id !== "string" || b.id.length === 0 || b.id.length > 64) {
      throw new CheckError("id: must be the id that acquire answered");
    }
    return { pool, key: b.key, id: b.id };
  }
}

/** A lease id as the library makes them (ratekeeper's concurrency.ts, checkLeaseId): it refuses any other. */
const LEASE_ID = /^[A-Za-z0-9_-]{12,40}\.[A-Za-z0-9_-]{8}$/;

/**
 * The library's refusal of a bad key or id (its RangeError, before any store call) is the
 * client's mistake: a 400 with its message. Told by the input, not by the error's type: anything
 * else, a store's own RangeError too, is the store failing (503), never blamed on the client.
 */
async function asCheck<T>(store: Store, p: Promise<T>, key: string, id?: string): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (refusedKey(key) || (id !== undefined && !LEASE_ID.test(id))) throw new CheckError(e instanceof Error ? e.message : String(e));
    throw new StoreFailure("store", e, store);
  }
}
