import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { LeaseReason } from "../../core/lease-reason.js";
import type { BoundLeases, ClockOptions, LeaseAnswer } from "../../store.js";
import { loadScript, type LoadedScript } from "./scripts.js";
import { RETRY_WHEN_DOWN_MS } from "./without-redis.js";
import type { RedisStore } from "./store.js";

/** What a refusal by the `"closed"` policy says to retry after (ms). */
/** Lease ids answered locally (the failure policy) that are remembered, per limit: past it the oldest are forgotten. */
const MAX_LOCAL_IDS = 100_000;

type Op = "acquire" | "renew" | "release" | "count";

/**
 * One concurrency limit's leases in Redis (scripts/concurrency.lua): one script call per acquire,
 * renew, release or count, on the key's own hash slot (`<prefix>{<namespace>:<key>}:c`).
 *
 * While Redis does not answer, the store's failure policy does:
 * - `"throw"`: the call rejects with a `RateLimitStoreError`.
 * - `"closed"`: acquires are refused (`reason: "store-error"`, `retryAfterMs: 1000`), renews say
 *   false (the holder should stop: its lease may expire unseen).
 * - `"open"`: acquires are granted without a lease (`reason: "store-error"`); their release and
 *   renew do nothing (renew says true).
 * - `{ insurance }`, and `"degraded"`: a local lease table answers (the insurance store's, at the
 *   full limit, `reason: "insurance"`; or this process's share, `floor(limit / N)`, for
 *   `"degraded"`, `reason: "degraded"`); those leases are
 *   released and renewed there. A renew of a lease held in Redis says true (the holder goes on;
 *   the lease may expire in Redis meanwhile).
 * An acquire whose reply did not come in time is released in the background: on the same
 * connection (the same slot's master, on a cluster) the release runs after the acquire, so a
 * slot taken too late is given back at once.
 */
export class RedisLeases implements BoundLeases {
  private readonly script: LoadedScript = loadScript("concurrency", []);
  private readonly head: string;
  private readonly limitArg: string;
  /** The failure policy's local lease table, and the instance count N it was made for ("degraded"). */
  private local: { table: BoundLeases; n: number } | undefined;
  /**
   * Leases the failure policy granted locally, by id: their key, and the table that holds them
   * or, for "open", "none" (granted without any lease). Their release and renew on that key stay
   * where they were granted.
   */
  private readonly localIds = new Map<string, { key: string; where: BoundLeases | "none" }>();

  constructor(
    private readonly store: RedisStore,
    private readonly limit: number,
    private readonly namespace: string,
    /** `{ injectedClock: true }` when the limiter injects its clock: the local lease table is bound with it. */
    private readonly clock?: ClockOptions,
  ) {
    this.head = `${store.prefix}{${namespace}:`;
    this.limitArg = String(limit);
  }

  acquire(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    return this.call("acquire", key, id, leaseMs, nowMs);
  }

  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    const where = this.localOf(key, id);
    if (where === "none") return Promise.resolve(this.plain(true, "store-error"));
    if (where !== undefined) return Promise.resolve(where.renew(key, id, leaseMs, nowMs)).then((a) => this.tag(a));
    return this.call("renew", key, id, leaseMs, nowMs);
  }

  release(key: string, id: string, nowMs: number | undefined): Promise<LeaseAnswer> {
    const where = this.localOf(key, id);
    if (where !== undefined) {
      this.localIds.delete(id);
      if (where === "none") return Promise.resolve(this.plain(true, "store-error"));
      return Promise.resolve(where.release(key, id, nowMs)).then((a) => this.tag(a));
    }
    return this.call("release", key, id, 0, nowMs);
  }

  count(key: string, nowMs: number | undefined): Promise<LeaseAnswer> {
    return this.call("count", key, "", 0, nowMs);
  }

  /** Where the lease `id` on `key` was granted locally, if it was (an id named with another key is not that lease). */
  private localOf(key: string, id: string): BoundLeases | "none" | undefined {
    const local = this.localIds.get(id);
    return local !== undefined && local.key === key ? local.where : undefined;
  }

  /** The Redis key of `key`'s leases. */
  keyOf(key: string): string {
    return `${this.head}${key}}:c`;
  }

  private async call(op: Op, key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    const now = nowMs === undefined ? "" : String(nowMs);
    const args = [op === "acquire" ? "a" : op === "renew" ? "r" : op === "release" ? "x" : "n", now];
    args.push(this.limitArg, id, String(leaseMs), String(this.store.minTtlMs));
    const redisKey = this.keyOf(key);
    let reply: unknown;
    try {
      // An acquire Redis grants after the policy answered is released as soon as its reply is seen.
      const late =
        op === "acquire" ? (r: unknown) => Array.isArray(r) && Number(r[0]) === 1 && this.giveBack(redisKey, id, now) : undefined;
      reply = await this.store.ask(this.script, [redisKey], args, late);
    } catch (e) {
      return this.failed(e, op, key, id, leaseMs, nowMs);
    }
    if (!Array.isArray(reply) || reply.length !== 4) {
      throw new RateLimitStoreError(`RedisStore ${op} "${key}": unexpected script reply ${describeValue(reply)}`);
    }
    const ok = Number(reply[0]) === 1;
    return {
      ok,
      remaining: Number(reply[1]),
      retryAfterMs: Number(reply[2]),
      reason: op === "acquire" && !ok ? "limit" : undefined,
    };
  }

  /**
   * A lease Redis may have granted after the caller was answered otherwise: remove it (best
   * effort), at the acquire's time (`now`: the injected clock's reading, or "" for Redis's). The
   * script first drops the key's leases expired at that time: at Redis's time, leases on an
   * injected clock behind it would all look expired and be dropped with this one.
   */
  private giveBack(redisKey: string, id: string, now: string): boolean {
    const args = ["x", now, this.limitArg, id, "0", String(this.store.minTtlMs)];
    this.store.ask(this.script, [redisKey], args).catch(() => undefined);
    return true;
  }

  /** Redis did not answer: the failure policy does. */
  private async failed(e: unknown, op: Op, key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    const err = this.store.report(e, { op, key, timedOut: isTimeout(e) });
    const f = this.store.failure;
    if (f === "throw") throw err;
    if (f === "open" || f === "closed") {
      const open = f === "open";
      if (op === "acquire" && open) this.remember(key, id, "none");
      if (op === "count") {
        return open ? { ok: false, remaining: this.limit, retryAfterMs: 0, reason: "store-error" } : this.plain(false, "store-error", true);
      }
      if (op === "release") return this.plain(false, "store-error");
      return this.plain(open, "store-error", !open);
    }
    // A local lease table: the insurance store's, or this process's share.
    const local = this.localLeases();
    switch (op) {
      case "acquire": {
        const a = this.tag(await local.acquire(key, id, leaseMs, nowMs));
        if (a.ok) this.remember(key, id, local);
        return a;
      }
      case "count":
        return this.tag(await local.count(key, nowMs));
      case "renew":
        return this.plain(true, this.policyReason());
      case "release":
        return this.plain(false, this.policyReason());
    }
  }

  /**
   * The local lease table of the failure policy, made on first need: the insurance store's, at
   * the full limit; or, for "degraded", this process's share, `floor(limit / N)` (at least 1) with
   * N the live instances, so N processes answering alone hold at most the limit between them.
   * When N changes a new binding is made at the new share, on the same namespace: the leases
   * already granted locally count against it (a store's bindings of one namespace share leases).
   */
  private localLeases(): BoundLeases {
    const f = this.store.failure;
    const n = typeof f === "object" ? 1 : Math.max(1, this.store.instances());
    if (this.local === undefined || this.local.n !== n) {
      const store = typeof f === "object" ? f.insurance : this.store.localStore();
      if (store.bindLeases === undefined) throw new RateLimitStoreError("RedisStore: the insurance store cannot hold leases");
      const limit = Math.max(1, Math.floor(this.limit / n));
      const table = this.clock ? store.bindLeases(limit, this.namespace, this.clock) : store.bindLeases(limit, this.namespace);
      this.local = { table, n };
    }
    return this.local.table;
  }

  private policyReason(): LeaseReason {
    return typeof this.store.failure === "object" ? "insurance" : "degraded";
  }

  /** A local answer, with the policy's reason (a refusal of a full key stays "limit"). */
  private tag(a: LeaseAnswer): LeaseAnswer {
    return { ...a, reason: a.reason === "limit" ? "limit" : this.policyReason() };
  }

  private plain(ok: boolean, reason: LeaseReason, full = false): LeaseAnswer {
    return { ok, remaining: 0, retryAfterMs: full ? RETRY_WHEN_DOWN_MS : 0, reason };
  }

  private remember(key: string, id: string, where: BoundLeases | "none"): void {
    if (this.localIds.size >= MAX_LOCAL_IDS) {
      const first = this.localIds.keys().next();
      if (!first.done) this.localIds.delete(first.value);
    }
    this.localIds.set(id, { key, where });
  }
}

function isTimeout(e: unknown): boolean {
  return e instanceof Error && /timeout|no reply/i.test(`${e.name} ${e.message}`);
}
