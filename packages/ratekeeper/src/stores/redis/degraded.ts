import { newDecision, type Decision } from "../../core/decision.js";
import { bucketRate, type ResolvedLimit } from "../../core/options.js";
import type { ClockOptions } from "../../store.js";
import type { MemoryStore } from "../memory.js";
import type { Table } from "../memory-table.js";
import { KeptKeys } from "./degraded-kept.js";

/**
 * Keys whose local admissions are remembered for reconciliation, per limiter, counting those
 * taken for a charge not answered yet; past it, admissions are not reconciled. Each such key is
 * pinned in the local store, so this bounds those pins; the keys kept after a partial charge
 * have a bound of their own (degraded-kept.ts).
 */
const MAX_LEDGER_KEYS = 100_000;
/** What a denial says to retry after when a cost cannot fit the local share at all. */
const NO_SHARE_RETRY_MS = 1_000;

/**
 * A key's units admitted locally, and the injected time of the last of them (`undefined` when
 * the limiter has no clock of its own). Redis is charged at that time: the key's state there is
 * on the limiter's clock, and a charge at Redis's own time (TIME) may lie far from it (a clock a
 * day behind: the charge opened a window a day ahead, and what the key held before was lost).
 */
interface LedgerEntry {
  units: number;
  nowMs: number | undefined;
}

/**
 * Each limit at a 1/n share: `limit`, `capacity` (and GCRA's burst) divided by n, rounded down,
 * at least 1. n processes limiting alone at this share admit at most the full limit between them.
 * A bucket's rate is its `unitLevel` and `drainPerMs`, derived from `limit`: derived again here
 * (copied, each share refilled at the whole limit's rate: n of them, n times the limit's refill).
 */
export function shareOf(limits: readonly ResolvedLimit[], n: number): ResolvedLimit[] {
  return limits.map((l) => {
    const capacity = Math.max(1, Math.floor(l.capacity / n));
    const limit = Math.max(1, Math.floor(l.limit / n));
    const burst = l.algorithm === "gcra" ? capacity - 1 : l.burst;
    return { ...l, limit, capacity, burst, ...bucketRate(l.windowMs, limit) };
  });
}

/**
 * The `"degraded"` failure policy for one limiter: while Redis is down this process keeps
 * limiting by itself, in memory, at its share of each limit (`limit / N`, N the live instances),
 * and remembers what it admitted per key (the ledger). When Redis answers again the store charges
 * the ledger to Redis ({@link DegradedLimiter.drain}), so a key does not get a fresh allowance
 * right after an outage.
 *
 * Worst case while Redis is down: what Redis had admitted before the outage, plus N local shares,
 * which add up to at most the limit (rounding down); N taken from the last heartbeat, so
 * instances started during the outage are not counted (see docs/redis.md).
 *
 * A key's local state must last while its admissions wait for Redis: dropped from the local
 * store (bounded: a key left alone while 50,000-100,000 others arrive), its next request started
 * a fresh share in the same outage, and a client with that many keys of its own could so give
 * any key a fresh share again and again. So the key is pinned there (memory-pins.ts) from its
 * first recorded admission until Redis took them (or a refund or reset emptied its entry): one
 * pin per ledger entry and per entry taken for a charge, at most MAX_LEDGER_KEYS. Past that bound
 * keys are still admitted at their share, unrecorded and unpinned (denying them would let that
 * client shut every new client out during an outage).
 */
export class DegradedLimiter {
  private bound: { n: number; table: Table<{ exp: number }>; minCapacity: number } | undefined;
  private readonly ledger = new Map<string, LedgerEntry>();
  /** Keys drained for a charge that Redis has not answered yet ({@link charged} or {@link restore}). */
  private charging = 0;
  /** Units admitted locally that the ledger could not hold (more than MAX_LEDGER_KEYS keys). */
  unrecorded = 0;
  /** Keys whose local state stays pinned after Redis only partly took their units, until it expires. */
  private readonly kept = new KeptKeys((key) => this.bound?.table.unpin(key));

  /**
   * @param local where the shares live (one memory store per RedisStore, made on first need, shared by its limiters)
   * @param instances N: the live instance count (or the `instances` option)
   * @param clock `{ injectedClock: true }` when the limiter injects its clock (the shares are bound with it)
   */
  constructor(
    private readonly limits: readonly ResolvedLimit[],
    private readonly namespace: string,
    private readonly local: () => MemoryStore,
    private readonly instances: () => number,
    private readonly clock?: ClockOptions,
  ) {}

  /**
   * Whether admissions wait to be charged to Redis: in the ledger, or drained for a charge not
   * answered yet (which may put them back). While it is true the store keeps reconciling this
   * limiter: a reconciliation that found the ledger empty while another's charge was out let the
   * store forget it, and the units that charge put back were never charged.
   */
  get pending(): boolean {
    return this.ledger.size > 0 || this.charging > 0;
  }

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Promise<Decision> {
    const b = this.table();
    if (cost > b.minCapacity) return Promise.resolve(this.noShare());
    // The memory table decides synchronously: the admission and its pin in one step.
    const d = b.table.consume(key, cost, nowMs, maxDelayMs);
    if (d.allowed) this.record(key, cost, nowMs);
    return Promise.resolve({ ...d, reason: "degraded" });
  }

  peek(key: string, cost: number, nowMs: number | undefined): Promise<Decision> {
    const b = this.table();
    if (cost > b.minCapacity) return Promise.resolve(this.noShare());
    return Promise.resolve({ ...b.table.peek(key, cost, nowMs), reason: "degraded" });
  }

  refund(key: string, cost: number, nowMs: number | undefined): Promise<void> {
    const e = this.ledger.get(key);
    const t = this.table().table;
    if (e !== undefined) {
      if (e.units > cost) e.units -= cost;
      else if (this.ledger.delete(key)) t.unpin(key);
    }
    t.refund(key, cost, nowMs);
    return Promise.resolve();
  }

  reset(key: string): Promise<void> {
    const t = this.table().table;
    if (this.ledger.delete(key)) t.unpin(key);
    this.kept.release(key);
    t.reset(key);
    return Promise.resolve();
  }

  /**
   * Takes the ledger's entries for the keys `take` accepts (those whose Redis answers again):
   * `[key, units admitted locally, the injected time of the last]`. Their local state stays until
   * Redis has taken the units ({@link DegradedLimiter.charged}): a charge may fail (Redis gone
   * again), and a key whose local state was forgotten here got a fresh share while Redis stayed
   * down, one more for each time Redis answered briefly.
   */
  drain(take: (key: string) => boolean): Array<[string, number, number | undefined]> {
    const out: Array<[string, number, number | undefined]> = [];
    for (const [key, { units, nowMs }] of this.ledger) {
      if (!take(key)) continue;
      out.push([key, units, nowMs]);
      this.ledger.delete(key);
    }
    this.charging += out.length;
    return out;
  }

  /**
   * Redis took the units drained for `key` (`whole`: all of them): it holds the key's state again,
   * so the local state is forgotten (a later outage starts the key at a fresh share, on top of
   * what Redis holds). Unless the key was admitted locally again since the drain (a call failed
   * meanwhile): those units wait in the ledger for the next charge, and the local state, which
   * counts them, stays until then (counting the charged units too: stricter than needed for that
   * moment, never looser). And unless Redis had no room for some (the key used up there too):
   * Redis does not count them, so the local state, which does, stays pinned until it expires
   * (degraded-kept.ts); forgotten, the key got a fresh share at each later outage in the window,
   * a whole limit more per flap.
   * @param nowMs the injected time the units were admitted at (else the local store's own clock)
   */
  charged(key: string, whole = true, nowMs?: number): Promise<void> {
    this.answered();
    const t = this.bound?.table;
    if (t === undefined) return Promise.resolve();
    if (whole) {
      t.unpin(key); // the drained entry's pin (a later entry of the key holds its own)
      this.kept.release(key);
      if (!this.ledger.has(key)) t.reset(key);
      return Promise.resolve();
    }
    // How long until the local state is back to a full share: it is kept that long (from now:
    // on an injected clock, measured from the admissions' time, so at least as long as needed).
    const lifeMs = t.peek(key, 1, nowMs).resetAfterMs;
    // The drained entry's pin becomes the kept key's, unless the key is kept already (or need not be).
    if (lifeMs <= 0 || !this.kept.keep(key, Date.now() + lifeMs)) t.unpin(key);
    return Promise.resolve();
  }

  /**
   * Puts drained units back in the ledger (a charge that Redis did not take), admitted at `nowMs`;
   * the key's local state still counts them, and stays pinned. Units admitted since the drain keep
   * their later time. Always room: the ledger's bound counts the drained entries.
   */
  restore(key: string, units: number, nowMs: number | undefined): void {
    this.answered();
    const e = this.ledger.get(key);
    if (e === undefined) {
      this.ledger.set(key, { units, nowMs }); // the drained entry's pin goes with it
      return;
    }
    e.units += units;
    e.nowMs ??= nowMs;
    this.bound?.table.unpin(key); // one entry, one pin
  }

  /** Adds units admitted locally at `nowMs` to the key's ledger entry; a new entry pins the key. */
  private record(key: string, units: number, nowMs: number | undefined): void {
    const had = this.ledger.get(key);
    if (had !== undefined) {
      had.units += units;
      had.nowMs = nowMs ?? had.nowMs;
    } else if (this.ledger.size + this.charging >= MAX_LEDGER_KEYS) this.unrecorded += units;
    else {
      this.ledger.set(key, { units, nowMs });
      this.bound?.table.pin(key);
    }
  }

  /** One drained key's charge was answered. */
  private answered(): void {
    this.charging = Math.max(0, this.charging - 1);
  }

  /**
   * The local shares, cut at N live instances. A new N (the heartbeat can answer while a key's
   * own calls fail: a Cluster with one node down) is taken only once nothing admitted locally
   * waits for Redis: the new shares start every key afresh, which on top of what a key already
   * used here is a second share in one outage (N 4 -> 3: 25 + 33 of 100). Until then the shares
   * stay at the N the admissions were counted at: stricter when N fell, and when N rose as loose
   * as instances started during an outage are anyway (they are not counted; docs/redis.md).
   */
  private table(): { n: number; table: Table<{ exp: number }>; minCapacity: number } {
    const n = Math.max(1, this.instances());
    const settled = this.ledger.size === 0 && this.charging === 0;
    if (this.bound === undefined || (this.bound.n !== n && settled)) {
      // The new shares start every key afresh: the old shares' states no longer count.
      this.kept.releaseAll();
      const limits = shareOf(this.limits, n);
      this.bound = {
        n,
        table: this.local().bindTable(limits, this.namespace, this.clock),
        minCapacity: Math.min(...limits.map((l) => l.capacity)),
      };
    }
    return this.bound;
  }

  /** A cost larger than this process's share: denied while Redis is down. */
  private noShare(): Decision {
    const lim = this.limits[0] as ResolvedLimit;
    const o = { allowed: false, remaining: 0, retryAfterMs: NO_SHARE_RETRY_MS, resetAfterMs: NO_SHARE_RETRY_MS, delayMs: 0 };
    return { ...newDecision(o, lim, 0, undefined), reason: "degraded" };
  }
}
