import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { LeaseReason } from "../../core/lease-reason.js";
import type { BoundLeases, ClockOptions, LeaseAnswer } from "../../store.js";
import { leaseClock } from "../memory-leases.js";
import { fastForeignMarker, foreignValueError } from "./foreign-value.js";
import { isTimeout, LeaseLedger } from "./lease-ledger.js";
import type { LocalLease } from "./local-leases.js";
import { loadScript, type LoadedScript } from "./scripts.js";
import { RETRY_WHEN_DOWN_MS } from "./without-redis.js";
import type { RedisStore } from "./store.js";

type Op = "acquire" | "renew" | "release" | "count";

/**
 * One concurrency limit's leases in Redis (scripts/concurrency.lua): one script call per acquire,
 * renew, release or count, on the key's own hash slot (`<prefix>{<namespace>:<key>}:c`, see
 * {@link LeaseLedger.keyOf}).
 *
 * While Redis does not answer, the store's failure policy does:
 * - `"throw"`: the call rejects with a `RateLimitStoreError`.
 * - `"closed"`: acquires are refused (`reason: "store-error"`, `retryAfterMs: 1000`), renews say
 *   false (the holder should stop: its lease may expire unseen).
 * - `"open"`: acquires are granted without a lease (`reason: "store-error"`); while Redis is
 *   down their release and renew do nothing (renew says true); once it answers they are handed
 *   to Redis as the local leases below are.
 * - `{ insurance }`, and `"degraded"`: a local lease table answers (the insurance store's, at the
 *   full limit, `reason: "insurance"`; or this process's share, `floor(limit / N)`, for
 *   `"degraded"`, `reason: "degraded"`); those leases are released and renewed there. A renew of
 *   a lease held in Redis says true (the holder goes on), and Redis is told of it when it answers.
 *   Once Redis answers again, the leases granted locally are handed to it (lease-ledger.ts):
 *   Redis then counts them, so it grants none of the slots they hold, and their renew and
 *   release go to Redis. The namespace's ledger is shared by its limiters, whatever their limits.
 * A release of a Redis lease that the policy answered (any policy but "throw") is sent to Redis
 * again when it answers, so the slot comes back then rather than when the lease expires.
 * A release of an id Redis does not hold (a lease another instance granted while only it had lost
 * Redis) stands there for the limiter's leaseMs, so that instance's hand-over of it does nothing.
 * An acquire whose reply did not come in time is released in the background: on the same
 * connection (the same slot's master, on a cluster) the release runs after the acquire, so a
 * slot taken too late is given back at once (unless the policy granted that lease locally: then
 * Redis holding it is right, and its hand-over or release follows).
 */
export class RedisLeases implements BoundLeases {
  private readonly script: LoadedScript = loadScript("concurrency", []);
  private readonly limitArg: string;
  /** The failure policy's local lease table, and the instance count N it was made for ("degraded"). */
  private local: { table: BoundLeases; n: number } | undefined;
  /** What the failure policy did in this namespace, for Redis to learn when it answers (lease-ledger.ts). */
  private readonly ledger: LeaseLedger;

  constructor(
    private readonly store: RedisStore,
    private readonly limit: number,
    private readonly namespace: string,
    /** `{ injectedClock: true }` when the limiter injects its clock: the local lease table is bound with it. */
    private readonly clock?: ClockOptions,
  ) {
    this.ledger = LeaseLedger.of(store, namespace);
    this.limitArg = String(limit);
  }

  acquire(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.ledger.lastNowMs = nowMs;
    // Redis first learns of the key's local leases, if it has any.
    const first = this.ledger.handKey(key);
    return first === undefined
      ? this.call("acquire", key, id, leaseMs, nowMs)
      : first.then(() => this.call("acquire", key, id, leaseMs, nowMs));
  }

  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.ledger.lastNowMs = nowMs;
    return this.renewOnce(key, id, leaseMs, nowMs, false);
  }

  /** A renew; `handed`: the lease's hand-over was tried just before (not tried again). */
  private renewOnce(key: string, id: string, leaseMs: number, nowMs: number | undefined, handed: boolean): Promise<LeaseAnswer> {
    const l = this.ledger.locals.of(key, id);
    if (l === undefined) return this.call("renew", key, id, leaseMs, nowMs);
    // Granted because the key held a foreign value: once that is deleted, Redis must learn of it
    // from its holder's renews too (acquires may reach another instance, whose Redis would grant
    // the whole limit again beside it); Redis refuses it, unreported, while the value is there.
    if (l.refused === true && !handed) this.ledger.handRefused(id, l);
    if (l.handing !== undefined) return l.handing.then(() => this.renewOnce(key, id, leaseMs, nowMs, true));
    if (l.where === "none" || l.where === "redis") {
      l.expiresAt = (nowMs ?? leaseClock()) + leaseMs;
      return Promise.resolve(this.plain(true, this.store.failure === "open" ? "store-error" : this.policyReason()));
    }
    return Promise.resolve(l.where.renew(key, id, leaseMs, nowMs)).then((a) => {
      if (a.ok) l.expiresAt = (nowMs ?? leaseClock()) + leaseMs;
      return this.tag(a);
    });
  }

  /** `leaseMs`: the limiter's; a release of an id Redis does not hold stands that long there (concurrency.lua KEYS[2]). */
  release(key: string, id: string, nowMs: number | undefined, leaseMs = 0): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.ledger.lastNowMs = nowMs;
    const l = this.ledger.locals.of(key, id);
    if (l === undefined) return this.call("release", key, id, leaseMs, nowMs);
    if (l.handing !== undefined) return l.handing.then(() => this.release(key, id, nowMs, leaseMs));
    this.ledger.locals.drop(id, l);
    // Redis may hold it too (a Redis lease renewed here, an acquire it took too late, a hand-over
    // whose reply was lost): released there as well, now or when Redis answers again.
    this.ledger.releaseInRedis(key, id, nowMs, leaseMs);
    if (l.where === "redis") return Promise.resolve(this.plain(true, this.store.failure === "open" ? "store-error" : this.policyReason()));
    if (l.where === "none") return Promise.resolve(this.plain(true, "store-error"));
    return Promise.resolve(l.where.release(key, id, nowMs)).then((a) => this.tag(a));
  }

  count(key: string, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.ledger.lastNowMs = nowMs;
    const first = this.ledger.handKey(key); // as for an acquire: a count says what an acquire would
    return first === undefined ? this.call("count", key, "", 0, nowMs) : first.then(() => this.call("count", key, "", 0, nowMs));
  }

  /** The Redis key of `key`'s leases. */
  keyOf(key: string): string {
    return this.ledger.keyOf(key);
  }

  private async call(op: Op, key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    const now = nowMs === undefined ? "" : String(nowMs);
    const args = [op === "acquire" ? "a" : op === "renew" ? "r" : op === "release" ? "x" : "n", now];
    args.push(this.limitArg, id, String(leaseMs), String(this.store.minTtlMs));
    const keys = this.ledger.keysOf(key);
    const redisKey = keys[0] as string;
    let reply: unknown;
    try {
      // An acquire Redis grants after the policy answered is released as soon as its reply is seen,
      // unless the policy granted that lease locally (see the class comment).
      const late =
        op === "acquire"
          ? (r: unknown) =>
              Array.isArray(r) && Number(r[0]) === 1 && this.ledger.locals.of(key, id) === undefined && this.giveBack(redisKey, id, now)
          : undefined;
      reply = await this.store.ask(this.script, keys, args, late);
    } catch (e) {
      return this.failed(e, op, key, id, leaseMs, nowMs);
    }
    const bad = fastForeignMarker(reply);
    if (bad !== undefined) return this.failed(foreignValueError(bad), op, key, id, leaseMs, nowMs, true);
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
    this.store.ask(this.script, [redisKey, `${redisKey}:r`], args).catch(() => undefined);
    return true;
  }

  /**
   * Redis did not answer (or, `foreign`, answered that the key holds a value the store did not
   * write): the failure policy does. Redis holds no lease of ours under a foreign value, and takes
   * none until that key is deleted: nothing is owed to it then, and a lease the policy grants from
   * a local table stays there (its renew and release go there) until an acquire or count on its
   * key hands it over (lease-ledger.ts handKey), which succeeds once the value is deleted.
   */
  private async failed(
    e: unknown,
    op: Op,
    key: string,
    id: string,
    leaseMs: number,
    nowMs: number | undefined,
    foreign = false,
  ): Promise<LeaseAnswer> {
    const err = this.store.report(e, { op, key, timedOut: isTimeout(e) });
    const f = this.store.failure;
    if (f === "throw") throw err;
    if (foreign) return this.foreignAnswer(op, key, id, leaseMs, nowMs);
    if (f === "open" || f === "closed") {
      const open = f === "open";
      if (op === "acquire" && open) {
        // Granted without a lease: handed to Redis as well when it answers, so that a holder that
        // goes on renewing it is counted there.
        this.ledger.local(key, id, this.entry("none", leaseMs, nowMs));
      }
      if (op === "count") {
        return open ? { ok: false, remaining: this.limit, retryAfterMs: 0, reason: "store-error" } : this.plain(false, "store-error", true);
      }
      if (op === "release") {
        this.ledger.owe(key, id, nowMs, leaseMs);
        return this.plain(false, "store-error");
      }
      // A renew said true: Redis is told when it answers (else the lease may expire there while its
      // holder goes on, and its slot be granted again).
      if (op === "renew" && open) this.ledger.local(key, id, this.entry("redis", leaseMs, nowMs));
      return this.plain(open, "store-error", !open);
    }
    // A local lease table: the insurance store's, or this process's share.
    const local = this.localLeases();
    switch (op) {
      case "acquire": {
        if (local === undefined) return this.plain(false, "degraded", true); // a share of 0
        const a = this.tag(await local.acquire(key, id, leaseMs, nowMs));
        if (a.ok) this.ledger.local(key, id, this.entry(local, leaseMs, nowMs)); // handed to Redis when it answers
        return a;
      }
      case "count":
        return local === undefined ? this.plain(false, "degraded", true) : this.tag(await local.count(key, nowMs));
      case "renew":
        this.ledger.local(key, id, this.entry("redis", leaseMs, nowMs)); // as for "open" above
        return this.plain(true, this.policyReason());
      case "release":
        this.ledger.owe(key, id, nowMs, leaseMs);
        return this.plain(false, this.policyReason());
    }
  }

  /** The failure policy's answer on a key holding a foreign value (see {@link RedisLeases.failed}). */
  private async foreignAnswer(op: Op, key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    const f = this.store.failure;
    if (f === "open" || f === "closed") {
      const open = f === "open";
      if (op === "count")
        return open ? { ok: false, remaining: this.limit, retryAfterMs: 0, reason: "store-error" } : this.plain(false, "store-error", true);
      return this.plain(open && op !== "release", "store-error", !open && op !== "release");
    }
    const local = this.localLeases();
    if (op === "acquire") {
      if (local === undefined) return this.plain(false, "degraded", true);
      const a = this.tag(await local.acquire(key, id, leaseMs, nowMs));
      if (a.ok) this.ledger.local(key, id, { ...this.entry(local, leaseMs, nowMs), refused: true });
      return a;
    }
    if (op === "count") return local === undefined ? this.plain(false, "degraded", true) : this.tag(await local.count(key, nowMs));
    return this.plain(op === "renew", this.policyReason());
  }

  /**
   * The local lease table of the failure policy, made on first need: the insurance store's, at
   * the full limit; or, for "degraded", this process's share, `floor(limit / N)` with N the live
   * instances, so N processes answering alone hold at most the limit between them. A share of 0
   * (fewer slots than instances) is none at all: undefined, every acquire refused (a share of 1
   * each would let N processes hold N leases of a smaller limit, a mutex's 1 among them).
   * When N changes a new binding is made at the new share, on the same namespace: the leases
   * already granted locally count against it (a store's bindings of one namespace share leases).
   */
  private localLeases(): BoundLeases | undefined {
    const f = this.store.failure;
    const n = typeof f === "object" ? 1 : Math.max(1, this.store.instances());
    if (this.local === undefined || this.local.n !== n) {
      const store = typeof f === "object" ? f.insurance : this.store.localStore();
      if (store.bindLeases === undefined) throw new RateLimitStoreError("RedisStore: the insurance store cannot hold leases");
      const limit = Math.floor(this.limit / n);
      if (limit === 0) return undefined;
      const table = this.clock ? store.bindLeases(limit, this.namespace, this.clock) : store.bindLeases(limit, this.namespace);
      this.local = { table, n };
    }
    return this.local.table;
  }

  /** A ledger entry for a lease granted (or renewed) now, living `leaseMs`. */
  private entry(where: LocalLease["where"], leaseMs: number, nowMs: number | undefined): Omit<LocalLease, "key" | "handing"> {
    return { where, expiresAt: (nowMs ?? leaseClock()) + leaseMs, injected: nowMs !== undefined, limit: this.limit };
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
}
