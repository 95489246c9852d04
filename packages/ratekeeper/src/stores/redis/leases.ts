import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { LeaseReason } from "../../core/lease-reason.js";
import type { BoundLeases, ClockOptions, LeaseAnswer } from "../../store.js";
import type { Lane } from "./lanes.js";
import { leaseClock } from "../memory-leases.js";
import { LocalLeases, OwedReleases, type LocalLease, type OwedRelease } from "./local-leases.js";
import { loadScript, type LoadedScript } from "./scripts.js";
import { RETRY_WHEN_DOWN_MS } from "./without-redis.js";
import type { Ledger, RedisStore } from "./store.js";

type Op = "acquire" | "renew" | "release" | "count";

/**
 * One concurrency limit's leases in Redis (scripts/concurrency.lua): one script call per acquire,
 * renew, release or count, on the key's own hash slot (`<prefix>{<namespace>:<key>}:c`, with `%` and
 * `:` of the namespace written `%25` and `%3A`, see {@link keyPart}).
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
 *   Once Redis answers again, the leases granted locally are handed to it
 *   ({@link RedisLeases.reconcile}): Redis then counts them, so it grants none of the slots they
 *   hold, and their renew and release go to Redis.
 * A release of a Redis lease that the policy answered (any policy but "throw") is sent to Redis
 * again when it answers, so the slot comes back then rather than when the lease expires.
 * An acquire whose reply did not come in time is released in the background: on the same
 * connection (the same slot's master, on a cluster) the release runs after the acquire, so a
 * slot taken too late is given back at once (unless the policy granted that lease locally: then
 * Redis holding it is right, and its hand-over or release follows).
 */
export class RedisLeases implements BoundLeases, Ledger {
  private readonly script: LoadedScript = loadScript("concurrency", []);
  private readonly head: string;
  private readonly limitArg: string;
  /** The failure policy's local lease table, and the instance count N it was made for ("degraded"). */
  private local: { table: BoundLeases; n: number } | undefined;
  /** Leases the failure policy granted locally (local-leases.ts). */
  private readonly locals = new LocalLeases();
  /** Releases of Redis leases that Redis did not get (local-leases.ts). */
  private readonly owed = new OwedReleases();
  /** With an injected clock, its latest reading: the time a hand-over to Redis is made at. */
  private lastNowMs: number | undefined;
  /** Nothing is admitted here that could not be remembered ({@link Ledger}). */
  readonly unrecorded = 0;

  constructor(
    private readonly store: RedisStore,
    private readonly limit: number,
    private readonly namespace: string,
    /** `{ injectedClock: true }` when the limiter injects its clock: the local lease table is bound with it. */
    private readonly clock?: ClockOptions,
  ) {
    this.head = `${store.prefix}{${keyPart(namespace)}:`;
    this.limitArg = String(limit);
  }

  acquire(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.lastNowMs = nowMs;
    return this.call("acquire", key, id, leaseMs, nowMs);
  }

  renew(key: string, id: string, leaseMs: number, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.lastNowMs = nowMs;
    const l = this.locals.of(key, id);
    if (l === undefined) return this.call("renew", key, id, leaseMs, nowMs);
    if (l.handing !== undefined) return l.handing.then(() => this.renew(key, id, leaseMs, nowMs));
    if (l.where === "none" || l.where === "redis") {
      l.expiresAt = (nowMs ?? leaseClock()) + leaseMs;
      return Promise.resolve(this.plain(true, this.store.failure === "open" ? "store-error" : this.policyReason()));
    }
    return Promise.resolve(l.where.renew(key, id, leaseMs, nowMs)).then((a) => {
      if (a.ok) l.expiresAt = (nowMs ?? leaseClock()) + leaseMs;
      return this.tag(a);
    });
  }

  release(key: string, id: string, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.lastNowMs = nowMs;
    const l = this.locals.of(key, id);
    if (l === undefined) return this.call("release", key, id, 0, nowMs);
    if (l.handing !== undefined) return l.handing.then(() => this.release(key, id, nowMs));
    this.locals.drop(id, l);
    // Redis may hold it too (a Redis lease renewed here, an acquire it took too late, a hand-over
    // whose reply was lost): released there as well, now or when Redis answers again.
    this.releaseInRedis(key, id, nowMs);
    if (l.where === "redis") return Promise.resolve(this.plain(true, this.store.failure === "open" ? "store-error" : this.policyReason()));
    if (l.where === "none") return Promise.resolve(this.plain(true, "store-error"));
    return Promise.resolve(l.where.release(key, id, nowMs)).then((a) => this.tag(a));
  }

  count(key: string, nowMs: number | undefined): Promise<LeaseAnswer> {
    if (nowMs !== undefined) this.lastNowMs = nowMs;
    return this.call("count", key, "", 0, nowMs);
  }

  /**
   * Hands the leases granted locally on `lane`'s keys to Redis (its breaker closed, or a call
   * that failed without opening it): each is added to its key's set for what is left of its life,
   * whatever the count (its holder has it already), and leaves the local table. One that fails
   * stays local and is tried again at the next reconciliation.
   */
  async reconcile(lane: Lane): Promise<void> {
    const now = this.clock?.injectedClock === true ? this.lastNowMs : undefined;
    const localNow = now ?? leaseClock();
    const handing: Promise<void>[] = [];
    for (const [id, l] of this.locals.toHand()) {
      const redisKey = this.keyOf(l.key);
      if (this.store.lanes.of(redisKey) !== lane) continue;
      const left = l.expiresAt - localNow;
      if (left > 0) handing.push(this.handOver(id, l, redisKey, now, left, lane));
      else this.locals.drop(id, l); // expired: its table drops it too
    }
    for (const [id, o] of this.owed.take((key) => this.store.lanes.of(this.keyOf(key)) === lane)) {
      handing.push(this.releaseOwed(id, o, lane));
    }
    await Promise.all(handing);
    if (this.locals.held === 0 && this.owed.size === 0) this.store.ledgerEmpty(this);
  }

  /** Sends a release that did not reach Redis again; kept for the next reconciliation if it fails once more. */
  private releaseOwed(id: string, o: OwedRelease, lane: Lane): Promise<void> {
    const args = ["x", o.nowMs === undefined ? "" : String(o.nowMs), this.limitArg, id, "0", String(this.store.minTtlMs)];
    return this.store.ask(this.script, [this.keyOf(o.key)], args).then(
      () => undefined,
      (e: unknown) => {
        this.owed.add(id, o);
        this.store.report(e, { op: "reconcile", key: o.key, timedOut: isTimeout(e) });
        this.store.reconcileSoon(lane);
      },
    );
  }

  /**
   * The policy told the holder of a Redis lease it was renewed: remembered, so that Redis is told
   * so when it answers again (else the lease may expire there while its holder goes on, and its
   * slot be granted again).
   */
  private renewedHere(key: string, id: string, leaseMs: number, nowMs: number | undefined): void {
    this.locals.add(key, id, "redis", (nowMs ?? leaseClock()) + leaseMs);
    this.store.holdsLedger(this);
    this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
  }

  /** Releases `id` in Redis now; if that fails, when Redis answers again. */
  private releaseInRedis(key: string, id: string, nowMs: number | undefined): void {
    const args = ["x", nowMs === undefined ? "" : String(nowMs), this.limitArg, id, "0", String(this.store.minTtlMs)];
    this.store.ask(this.script, [this.keyOf(key)], args).catch(() => this.owe(key, id, nowMs));
  }

  /** A release the failure policy answered: Redis gets it when it answers again. */
  private owe(key: string, id: string, nowMs: number | undefined): void {
    this.owed.add(id, { key, nowMs });
    this.store.holdsLedger(this);
    this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
  }

  /** One lease to Redis, for `leftMs` from `now` (the injected clock's, else Redis's time). */
  private handOver(id: string, l: LocalLease, redisKey: string, now: number | undefined, leftMs: number, lane: Lane): Promise<void> {
    // A Redis lease renewed here: made so again if it expired and its slot is free ("e"); the
    // others: added whatever the count ("d").
    const mode = l.where === "redis" ? "e" : "d";
    const args = [mode, now === undefined ? "" : String(now), this.limitArg, id, String(leftMs), String(this.store.minTtlMs)];
    const done = this.store.ask(this.script, [redisKey], args).then(
      () => {
        l.handing = undefined;
        this.locals.drop(id, l);
        if (typeof l.where === "object") void Promise.resolve(l.where.release(l.key, id, now)).catch(() => undefined);
      },
      (e: unknown) => {
        l.handing = undefined;
        this.store.report(e, { op: "reconcile", key: l.key, timedOut: isTimeout(e) });
        this.store.reconcileSoon(lane);
      },
    );
    l.handing = done;
    return done;
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
      // An acquire Redis grants after the policy answered is released as soon as its reply is seen,
      // unless the policy granted that lease locally (see the class comment).
      const late =
        op === "acquire"
          ? (r: unknown) =>
              Array.isArray(r) && Number(r[0]) === 1 && this.locals.of(key, id) === undefined && this.giveBack(redisKey, id, now)
          : undefined;
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
      if (op === "acquire" && open) {
        // Granted without a lease: handed to Redis as well when it answers, so that a holder that
        // goes on renewing it is counted there.
        this.locals.add(key, id, "none", (nowMs ?? leaseClock()) + leaseMs);
        this.store.holdsLedger(this);
        this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
      }
      if (op === "count") {
        return open ? { ok: false, remaining: this.limit, retryAfterMs: 0, reason: "store-error" } : this.plain(false, "store-error", true);
      }
      if (op === "release") {
        this.owe(key, id, nowMs);
        return this.plain(false, "store-error");
      }
      if (op === "renew" && open) this.renewedHere(key, id, leaseMs, nowMs);
      return this.plain(open, "store-error", !open);
    }
    // A local lease table: the insurance store's, or this process's share.
    const local = this.localLeases();
    switch (op) {
      case "acquire": {
        if (local === undefined) return this.plain(false, "degraded", true); // a share of 0
        const a = this.tag(await local.acquire(key, id, leaseMs, nowMs));
        if (a.ok) {
          this.locals.add(key, id, local, (nowMs ?? leaseClock()) + leaseMs);
          // Handed to Redis when it answers again.
          this.store.holdsLedger(this);
          this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
        }
        return a;
      }
      case "count":
        return local === undefined ? this.plain(false, "degraded", true) : this.tag(await local.count(key, nowMs));
      case "renew":
        this.renewedHere(key, id, leaseMs, nowMs);
        return this.plain(true, this.policyReason());
      case "release":
        this.owe(key, id, nowMs);
        return this.plain(false, this.policyReason());
    }
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

/**
 * A namespace as it goes into a lease's Redis key, before the `:` that ends it: its own `:`
 * written `%3A` (and `%` as `%25`), so that no namespace and key meet another's in one Redis key
 * (namespace `n`, key `b:x` and namespace `n:b`, key `x` were both `{n:b:x}:c`: a client choosing
 * its key took another pool's slots). Namespaces without `:` or `%` (the defaults) are unchanged.
 */
function keyPart(namespace: string): string {
  return namespace.includes(":") || namespace.includes("%") ? namespace.replace(/%/g, "%25").replace(/:/g, "%3A") : namespace;
}

function isTimeout(e: unknown): boolean {
  return e instanceof Error && /timeout|no reply/i.test(`${e.name} ${e.message}`);
}
