import { leaseClock } from "../memory-leases.js";
import { fastForeignMarker, foreignValueError } from "./foreign-value.js";
import type { Lane } from "./lanes.js";
import { LocalLeases, OwedReleases, type LocalLease, type OwedRelease } from "./local-leases.js";
import { keyPart } from "./key-part.js";
import { loadScript, type LoadedScript } from "./scripts.js";
import type { Ledger, RedisStore } from "./store.js";

/** The ledger of each namespace, per store: every ConcurrencyLimiter of a namespace shares it. */
const LEDGERS = new WeakMap<RedisStore, Map<string, LeaseLedger>>();

/**
 * What the failure policy of a RedisStore's concurrency limits did in one namespace while Redis
 * did not answer, and its hand-over to Redis when Redis answers again (a store {@link Ledger}):
 * the leases granted locally (or granted without a lease, `"open"`), the renews of Redis leases
 * it said true to, and the releases Redis did not get (local-leases.ts). One per store and
 * namespace, shared by every limiter of the namespace whatever its limit, so that a lease granted
 * through one limiter is renewed and released through another (a service's pool limiter made
 * anew by a reload, a by-id release), as it would be in Redis.
 */
export class LeaseLedger implements Ledger {
  readonly locals = new LocalLeases();
  private readonly owed = new OwedReleases();
  private readonly script: LoadedScript = loadScript("concurrency", []);
  private readonly head: string;
  /** With an injected clock, its latest reading: the time a hand-over to Redis is made at. */
  lastNowMs: number | undefined;
  /** Nothing is admitted here that could not be remembered ({@link Ledger}). */
  readonly unrecorded = 0;

  private constructor(
    private readonly store: RedisStore,
    namespace: string,
  ) {
    this.head = `${store.prefix}{${keyPart(namespace)}:`;
  }

  /** The ledger of `namespace` on `store`. */
  static of(store: RedisStore, namespace: string): LeaseLedger {
    let byNamespace = LEDGERS.get(store);
    if (byNamespace === undefined) LEDGERS.set(store, (byNamespace = new Map<string, LeaseLedger>()));
    let ledger = byNamespace.get(namespace);
    if (ledger === undefined) byNamespace.set(namespace, (ledger = new LeaseLedger(store, namespace)));
    return ledger;
  }

  /**
   * The Redis key of `key`'s leases: `<prefix>{<namespace>:<key>}:c`, the namespace written as
   * {@link keyPart} writes it.
   */
  keyOf(key: string): string {
    return `${this.head}${key}}:c`;
  }

  /**
   * concurrency.lua's KEYS for `key`: its leases, and beside them (same hash tag, same slot) its
   * tombstones, `<prefix>{<namespace>:<key>}:c:r`, the ids released while Redis did not hold them.
   */
  keysOf(key: string): string[] {
    const k = this.keyOf(key);
    return [k, `${k}:r`];
  }

  /** A lease the policy granted (or, `where: "redis"`, said was renewed): Redis learns of it when it answers. */
  local(key: string, id: string, l: Omit<LocalLease, "key" | "handing">): void {
    this.locals.add(key, id, l);
    this.store.holdsLedger(this);
    if (l.refused !== true) this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
  }

  /** Releases `id` in Redis now; if that fails, when Redis answers again (not when it refused the key: {@link LeaseLedger.refused}). */
  releaseInRedis(key: string, id: string, nowMs: number | undefined, leaseMs: number): void {
    this.store.ask(this.script, this.keysOf(key), releaseArgs(id, nowMs, leaseMs)).then(
      (r) => this.refused(r, key),
      () => this.owe(key, id, nowMs, leaseMs),
    );
  }

  /**
   * Whether concurrency.lua's reply `r` is the marker of a key holding a value the store did not
   * write: then reported (naming that key, and what to do) and not tried again. Redis answered;
   * it would refuse each retry the same way until the key is deleted, and retrying on a timer
   * reported it every 100 ms for as long as the entry lived (an owed release: for ever).
   */
  private refused(r: unknown, key: string, reported = false): boolean {
    const bad = fastForeignMarker(r);
    if (bad === undefined) return false;
    if (!reported) this.store.report(foreignValueError(bad), { op: "reconcile", key, timedOut: false });
    return true;
  }

  /** A release the failure policy answered: Redis gets it when it answers again. */
  owe(key: string, id: string, nowMs: number | undefined, leaseMs: number): void {
    this.owed.add(id, { key, nowMs, leaseMs });
    this.store.holdsLedger(this);
    this.store.reconcileSoon(this.store.lanes.of(this.keyOf(key)));
  }

  /**
   * Hands what was done on `lane`'s keys to Redis (its breaker closed, or a call that failed
   * without opening it). A lease granted locally is added to its key's set for what is left of
   * its life, whatever the count (its holder has it already: `"d"`), and leaves the local table;
   * a Redis lease the policy said was renewed is extended, or taken again if it expired and its
   * key has a free slot (`"e"`); a release is sent again. What fails is tried again at the next
   * reconciliation.
   */
  async reconcile(lane: Lane): Promise<void> {
    const handing: Promise<void>[] = [];
    for (const [id, l] of this.locals.toHand()) {
      const redisKey = this.keyOf(l.key);
      if (this.store.lanes.of(redisKey) !== lane) continue;
      const h = this.handOne(id, l, redisKey, lane);
      if (h !== undefined) handing.push(h);
    }
    for (const [id, o] of this.owed.take((key) => this.store.lanes.of(this.keyOf(key)) === lane)) {
      handing.push(this.releaseOwed(id, o, lane));
    }
    await Promise.all(handing);
    if (this.locals.held === 0 && this.owed.size === 0) this.store.ledgerEmpty(this);
  }

  /**
   * Before a call on `key` that Redis counts from (an acquire, a count): hands the key's local
   * entries to Redis first, on the same connection, so Redis runs them before that call. Else,
   * between Redis answering again and the reconciliation (up to 100 ms after a lone failed call),
   * Redis would grant the slots they hold (a limit of 1: a second holder). Nothing while the lane
   * is down. Leases granted because the key held a foreign value ({@link LocalLease.refused}) are
   * tried again here too, never on a timer: once that value is deleted, Redis counts from this
   * call on, and without them it would grant the whole limit again beside them (for as long as
   * their holders renew them). While the value is there, Redis refuses them again, unreported
   * (the call itself is). Of those, one is tried first and the rest only once Redis took it (one
   * script call per lease on every acquire cost a pool of 1000 a thousand calls an acquire while
   * the value stayed): the promise returned, when there is one, is to be awaited before the call,
   * so that Redis still has them all before it counts.
   */
  handKey(key: string): Promise<void> | undefined {
    if (!this.locals.has(key)) return undefined;
    const redisKey = this.keyOf(key);
    const lane = this.store.lanes.of(redisKey);
    if (lane.breaker.state !== "closed") return undefined;
    const refused: [string, LocalLease][] = [];
    for (const [id, l] of this.locals.toHand(key)) {
      if (l.refused === true) refused.push([id, l]);
      else void this.handOne(id, l, redisKey, lane);
    }
    for (let i = 0; i < refused.length; i++) {
      const [id, l] = refused[i] as [string, LocalLease];
      const probe = this.handOne(id, l, redisKey, lane, true); // undefined: expired, dropped
      if (probe === undefined) continue;
      return probe.then(() => {
        if (this.locals.of(key, id) === l) return; // still refused (or not answered): the rest would be too
        for (const [rid, rl] of refused.slice(i + 1)) if (rl.handing === undefined) void this.handOne(rid, rl, redisKey, lane, true);
      });
    }
    return undefined;
  }

  /**
   * Before a renew of `l`, a lease granted because its key held a foreign value: hands it to Redis
   * on the same connection, as {@link LeaseLedger.handKey} does before an acquire. Without it, a
   * lease whose acquires go to another instance (which finds the value deleted) stayed local for
   * as long as its holder renewed it, and Redis granted the whole limit again beside it.
   */
  handRefused(id: string, l: LocalLease): void {
    const redisKey = this.keyOf(l.key);
    const lane = this.store.lanes.of(redisKey);
    if (lane.breaker.state !== "closed" || l.handing !== undefined) return;
    void this.handOne(id, l, redisKey, lane, true);
  }

  /** Hands `l` over for what is left of its life, or drops it when nothing is; one Redis refused only when `refusedToo`. */
  private handOne(id: string, l: LocalLease, redisKey: string, lane: Lane, refusedToo = false): Promise<void> | undefined {
    const now = l.injected ? this.lastNowMs : undefined;
    const left = l.expiresAt - (now ?? leaseClock());
    if (left <= 0) {
      this.locals.drop(id, l); // expired: its table drops it too
      return undefined;
    }
    return l.refused === true && !refusedToo ? undefined : this.handOver(id, l, redisKey, now, left, lane);
  }

  /** One lease to Redis, for `leftMs` from `now` (the injected clock's, else Redis's time). */
  private handOver(id: string, l: LocalLease, redisKey: string, now: number | undefined, leftMs: number, lane: Lane): Promise<void> {
    const mode = l.where === "redis" ? "e" : "d";
    const args = [mode, now === undefined ? "" : String(now), String(l.limit), id, String(leftMs), String(this.store.minTtlMs)];
    const done = this.store.ask(this.script, [redisKey, `${redisKey}:r`], args).then(
      (r) => {
        l.handing = undefined;
        if (this.refused(r, l.key, l.refused === true)) {
          l.refused = true; // kept here, where its renew and release go; handed again only before a call on its key (handKey)
          return;
        }
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

  /** Sends a release that did not reach Redis again; kept for the next reconciliation if it fails once more. */
  private releaseOwed(id: string, o: OwedRelease, lane: Lane): Promise<void> {
    return this.store.ask(this.script, this.keysOf(o.key), releaseArgs(id, o.nowMs, o.leaseMs)).then(
      (r) => void this.refused(r, o.key),
      (e: unknown) => {
        this.owed.add(id, o);
        this.store.report(e, { op: "reconcile", key: o.key, timedOut: isTimeout(e) });
        this.store.reconcileSoon(lane);
      },
    );
  }
}

/**
 * concurrency.lua's arguments for a release of `id` at `nowMs` (the limit is not read): if Redis
 * does not hold it, the release stands `leaseMs` (a tombstone), so a hand-over of that lease by an
 * instance that granted it without Redis does not take its slot again.
 */
function releaseArgs(id: string, nowMs: number | undefined, leaseMs: number): string[] {
  return ["x", nowMs === undefined ? "" : String(nowMs), "1", id, String(leaseMs), "0"];
}

/** Whether a failure was Redis's silence (the watchdog's timeout) rather than an error. */
export function isTimeout(e: unknown): boolean {
  return e instanceof Error && /timeout|no reply/i.test(`${e.name} ${e.message}`);
}
