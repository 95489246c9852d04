import { newDecision, type Decision, type Outcome } from "../core/decision.js";
import type { BlockOutcome } from "../core/lease-block.js";
import { costTooHigh, maxCostOf } from "../core/max-cost.js";
import { MAX_TIMER_MS } from "../core/max-timer.js";
import type { ResolvedLimit } from "../core/options.js";
import type { BoundStore, ResolvedLease } from "../store.js";
import { evictee } from "./lease-evict.js";
import { newKeyLease, type BlockSource, type KeyLease, type Waiter } from "./lease-key.js";

export type { BlockSource } from "./lease-key.js";

/** How many rounds of takes on their way {@link LeasedTable.close} waits for. */
const CLOSE_ROUNDS = 4;

/**
 * Quota leasing for one limit (RateLimiter option `lease`): decisions on a key are made locally
 * from a block of its allowance that this process took from the shared store, so a hot key costs
 * one store call per block instead of one per decision. Every unit admitted here was taken from
 * the store first and is spent before its block expires, so the store's bound holds over every
 * process (see core/lease-block.ts and docs/leasing.md for what each algorithm keeps exact).
 *
 * - Block size: this key's demand over one block's life (`blockMs`), measured between takes;
 *   the first take asks only for what is waiting (a cold key costs what it did without leasing).
 *   The store caps it by the number of instances drawing on the key (core/lease-block.ts).
 * - A block lives `blockMs` (and never past its fixed window), counted from before the take was
 *   sent; then its unused units go back to the store (on the next use, or by a sweep that never
 *   keeps the process alive), and on {@link LeasedTable.close}.
 * - No block available: requests are denied locally until the store said one may be (a bucket's
 *   refill, the next window), rechecked at least every `blockMs` for units others gave back.
 * - The store failing: the waiting decisions go to the unleased table, whose failure policy answers.
 * Peeks answer as a consume would (the live block, else the store); refunds go to the live block
 * up to what it spent, the rest to the store.
 */
export class LeasedTable implements BoundStore {
  private readonly keys = new Map<string, KeyLease>();
  /** The most this limit could ever admit: a larger cost is refused (core/max-cost.ts) before a key's lease is touched. */
  private readonly maxCost: number;
  private readonly out: Outcome = { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, delayMs: 0 };
  private sweeper: ReturnType<typeof setInterval> | undefined;
  /** Takes on their way (settled once their block is used), which {@link LeasedTable.close} waits for. */
  private readonly inflight = new Set<Promise<void>>();
  /**
   * The limiter injects its clock: its latest reading, else undefined. Local times are then its
   * readings, the sweep (real time) stays off, and units given back without a decision at hand
   * (close, eviction) go back at this time, on the clock the key's state is on.
   */
  private lastNowMs: number | undefined;
  /** Units taken from the store (for tests and stats). */
  taken = 0;
  /** Store calls made for blocks (takes and give-backs). */
  calls = 0;

  /** Keys holding a lease (for tests and stats). */
  get size(): number {
    return this.keys.size;
  }

  /**
   * @param inner the same limit without leasing: peeks, resets, refunds without a block, and the failure policy
   * @param clock local monotonic ms when no time is injected
   */
  constructor(
    private readonly lim: ResolvedLimit,
    private readonly source: BlockSource,
    private readonly inner: BoundStore,
    private readonly lease: ResolvedLease,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.maxCost = maxCostOf([lim]);
  }

  consume(key: string, cost: number, nowMs: number | undefined): Decision | Promise<Decision> {
    if (cost > this.maxCost) return Promise.reject(costTooHigh(cost, this.maxCost));
    let now: number;
    if (nowMs === undefined) now = this.clock();
    else {
      now = nowMs;
      this.lastNowMs = nowMs;
    }
    const k = this.keys.get(key) ?? this.open(key);
    // No room for another key (maxKeys, every one busy with a take): decided per decision.
    if (k === undefined) return this.inner.consume(key, cost, nowMs);
    k.demand += cost;
    if (k.units >= cost && now < k.expiresAt) {
      k.units -= cost;
      k.spent += cost;
      return this.decide(true, k, now);
    }
    if (k.units > 0 && now >= k.expiresAt) void this.giveBack(key, k, nowMs);
    if (k.taking || k.waiters.length > 0) return this.wait(key, k, cost, nowMs);
    if (now < k.recheckAt) return this.decide(false, k, now);
    return this.wait(key, k, cost, nowMs);
  }

  /**
   * What a consume would answer, changing nothing: from the live block when it holds the cost, a
   * local denial while the last take found none, else the store's peek (a consume would take a
   * block then). The store counts every block as spent, so it alone would deny what a block admits.
   */
  peek(key: string, cost: number, nowMs: number | undefined): Decision | Promise<Decision> {
    if (cost > this.maxCost) return Promise.reject(costTooHigh(cost, this.maxCost));
    const k = this.keys.get(key);
    const now = nowMs ?? this.clock();
    if (k !== undefined && k.units >= cost && now < k.expiresAt) return this.decide(true, k, now, cost);
    if (k !== undefined && !k.taking && k.waiters.length === 0 && now < k.recheckAt) {
      return this.decide(false, k, now);
    }
    return this.inner.peek(key, cost, nowMs);
  }

  /**
   * Into the live block, at most what it spent: more would be units it never held (admitted from
   * an earlier block or window), an allowance out of nothing. The rest is the store's to refund,
   * as without leasing; the block's unspent units go back first, so that the store's count, which
   * holds them as taken, is not lowered under what this process may still spend.
   */
  refund(key: string, cost: number, nowMs: number | undefined): void | Promise<void> {
    const k = this.keys.get(key);
    if (k === undefined || (nowMs ?? this.clock()) >= k.expiresAt) return this.inner.refund(key, cost, nowMs);
    const back = Math.min(cost, k.spent);
    k.units += back;
    k.spent -= back;
    if (back === cost) return;
    const held = k.units > 0 ? this.giveBack(key, k, nowMs) : undefined;
    return Promise.resolve(held).then(() => this.inner.refund(key, cost - back, nowMs));
  }

  async reset(key: string): Promise<void> {
    const k = this.keys.get(key);
    if (k !== undefined) this.keys.delete(key);
    await this.inner.reset(key);
  }

  /**
   * Gives every unused unit back to the store (a process that stops), those of takes still on
   * their way included: they are waited for (a few rounds: a block that falls short of the
   * decisions waiting for it starts another take). The table stays usable.
   */
  async close(): Promise<void> {
    for (let round = 0; round < CLOSE_ROUNDS && this.inflight.size > 0; round++) await Promise.allSettled([...this.inflight]);
    this.stopSweep();
    const gives: Promise<void>[] = [];
    for (const [key, k] of this.keys) {
      if (k.units > 0) gives.push(this.giveBack(key, k, this.lastNowMs));
    }
    await Promise.all(gives);
  }

  private open(key: string): KeyLease | undefined {
    if (this.keys.size >= this.lease.maxKeys && !this.evict()) return undefined;
    const k = newKeyLease();
    this.keys.set(key, k);
    return k;
  }

  /**
   * Queues a decision behind the take in flight, or starts one. A decision waiting for a take
   * waits for the store: past the store's bound on those, it goes to the unleased table, which
   * answers as the store does then (RedisStore: `reason: "overloaded"`).
   */
  private wait(key: string, k: KeyLease, cost: number, nowMs: number | undefined): Decision | Promise<Decision> {
    if (!this.source.enter()) return this.inner.consume(key, cost, nowMs);
    return new Promise<Decision | Promise<Decision>>((resolve) => {
      k.waiters.push({ cost, nowMs, resolve });
      if (!k.taking) this.take(key, k, nowMs);
    }) as Promise<Decision>;
  }

  /** One take for the waiters of `k`: sized by the key's demand, at least what waits. */
  private take(key: string, k: KeyLease, nowMs: number | undefined): void {
    const now = nowMs ?? this.clock();
    let waiting = 0;
    for (const w of k.waiters) waiting += w.cost;
    let want = waiting;
    if (!Number.isNaN(k.askedAt)) {
      const elapsed = Math.max(1, now - k.askedAt);
      want = Math.max(waiting, Math.ceil((k.demand * this.lease.blockMs) / elapsed));
    }
    k.demand = 0;
    k.askedAt = now;
    k.taking = true;
    // The newest key now, for evictee(): a key that takes often stays clear of the ones making room.
    if (this.keys.get(key) === k) {
      this.keys.delete(key);
      this.keys.set(key, k);
    }
    this.calls++;
    const taking: Promise<void> = this.source
      .take(key, Math.min(want, this.lim.capacity), nowMs)
      .then(
        (b) => this.took(key, k, b, now, nowMs),
        () => this.failed(key, k, nowMs),
      )
      .finally(() => this.inflight.delete(taking));
    this.inflight.add(taking);
  }

  private took(key: string, k: KeyLease, b: BlockOutcome, sentAt: number, nowMs: number | undefined): void {
    k.taking = false;
    this.taken += b.taken;
    const now = nowMs ?? this.clock();
    if (k.units > 0 && now >= k.expiresAt) void this.giveBack(key, k, nowMs);
    // The key was reset since the block was taken: what is left of it (too little for a waiting
    // cost) was counted in the state the reset forgot, and goes nowhere (docs/leasing.md).
    if (b.epoch !== k.epoch) {
      k.units = 0;
      k.spent = 0;
      k.epoch = b.epoch;
    }
    k.resetAt = sentAt + b.resetAfterMs;
    k.left = b.left;
    if (b.taken > 0) {
      // A bucket's units are spent at most blockMs after the store charged them (its bound in
      // docs/leasing.md), so counted from before the take was sent: a reply held back by a busy
      // event loop must not stretch it. A fixed window's bound is its window's end, counted from
      // the send (never later than the store's own end); there blockMs only limits how long units
      // sit unused, so it counts from the arrival and a late reply still serves its waiters here.
      const fixed = this.lim.algorithm === "fixed-window";
      let until = (fixed ? now : sentAt) + this.lease.blockMs;
      if (b.validMs > 0) until = Math.min(until, sentAt + b.validMs);
      // Leftovers (too few for a waiting cost) of a window that has ended are worth nothing in the
      // new one; otherwise they join the new block, which then ends when the older one did.
      if (fixed && b.blockStart !== k.blockStart) {
        k.units = 0;
        k.spent = 0;
      }
      k.expiresAt = k.units > 0 ? Math.min(k.expiresAt, until) : until;
      k.blockStart = k.units > 0 && !fixed ? Math.min(k.blockStart, b.blockStart) : b.blockStart;
      k.units += b.taken;
      k.recheckAt = Number.NEGATIVE_INFINITY;
      this.startSweep();
    } else {
      k.retryAt = sentAt + b.waitMs;
      k.recheckAt = sentAt + Math.min(b.waitMs, this.lease.blockMs);
    }
    while (k.waiters.length > 0) {
      const w = k.waiters[0] as Waiter;
      const t = w.nowMs ?? now;
      if (k.units >= w.cost && t < k.expiresAt) {
        k.units -= w.cost;
        k.spent += w.cost;
        k.waiters.shift();
        this.settle(w, this.decide(true, k, t));
      } else if (b.taken === 0) {
        k.waiters.shift();
        this.settle(w, this.decide(false, k, t));
      } else if (t >= k.expiresAt && w.nowMs === undefined) {
        // The block's window ended while it travelled (a reply slower than the window's last
        // moments): these decisions go to the store one by one, which decides each exactly.
        if (k.units > 0) void this.giveBack(key, k, nowMs);
        const rest = k.waiters;
        k.waiters = [];
        for (const x of rest) this.settle(x, () => this.inner.consume(key, x.cost, x.nowMs));
        return;
      } else {
        // The block ran out (or, on an injected clock, ended before this decision's time) with
        // decisions still waiting: another take for them.
        this.take(key, k, w.nowMs);
        return;
      }
    }
  }

  /** The store failed: the waiting decisions go to the unleased table (its failure policy answers). */
  private failed(key: string, k: KeyLease, nowMs: number | undefined): void {
    k.taking = false;
    const waiters = k.waiters;
    k.waiters = [];
    for (const w of waiters) this.settle(w, () => this.inner.consume(key, w.cost, w.nowMs ?? nowMs));
  }

  /**
   * Answers a waiting decision: with `d`, or what `d()` answers once the decision stops waiting
   * here (a throw becomes its rejection: it must not escape a take's callback, nor leave the
   * decisions behind it unanswered).
   */
  private settle(w: Waiter, d: Decision | (() => Decision | Promise<Decision>)): void {
    this.source.leave();
    if (typeof d !== "function") return w.resolve(d);
    try {
      w.resolve(Promise.resolve(d()));
    } catch (e) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the thrown value, as an async function would reject with
      w.resolve(Promise.reject(e));
    }
  }

  /** Sends the block's unused units back to the store (best effort: a failure strands them until the state expires). */
  private giveBack(key: string, k: KeyLease, nowMs: number | undefined): Promise<void> {
    const units = k.units;
    k.units = 0;
    k.spent = 0;
    k.expiresAt = 0;
    this.calls++;
    return this.source.give(key, units, k.blockStart, k.epoch, nowMs).catch(() => undefined);
  }

  /** A local decision; `spend`: units a peek's request would take from the block (a consume has taken them). */
  private decide(allowed: boolean, k: KeyLease, now: number, spend = 0): Decision {
    const o = this.out;
    o.allowed = allowed;
    // What this block has, and what the store had left at the last take: what could still be
    // admitted as far as this process knows (the block's alone said 0 at each block's end).
    o.remaining = k.units - spend + k.left;
    o.retryAfterMs = allowed ? 0 : Math.max(1, Math.ceil(k.retryAt - now));
    o.resetAfterMs = Math.max(0, Math.ceil(k.resetAt - now));
    return newDecision(o, this.lim, 0, undefined);
  }

  /** Drops an idle key (its unused units go back) to stay within `maxKeys` (lease-evict.ts); false when every key is busy with a take. */
  private evict(): boolean {
    const key = evictee(this.keys, this.lastNowMs ?? this.clock());
    if (key === undefined) return false;
    const k = this.keys.get(key) as KeyLease;
    if (k.units > 0) void this.giveBack(key, k, this.lastNowMs);
    this.keys.delete(key);
    return true;
  }

  /** Every `blockMs`: expired blocks give their unused units back; idle keys are forgotten. */
  private startSweep(): void {
    if (this.sweeper !== undefined || this.lastNowMs !== undefined) return;
    // At most what a timer holds (2^31 - 1 ms): node runs a longer interval every millisecond.
    this.sweeper = setInterval(() => this.sweep(), Math.min(this.lease.blockMs, MAX_TIMER_MS));
    this.sweeper.unref?.();
  }

  private stopSweep(): void {
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Real time only: with an injected clock, expired blocks go back on their key's next use. */
  private sweep(): void {
    const now = this.clock();
    let live = 0;
    for (const [key, k] of this.keys) {
      if (k.taking || k.waiters.length > 0) {
        live++;
        continue;
      }
      if (k.units > 0 && now >= k.expiresAt) void this.giveBack(key, k, undefined);
      if (k.units > 0) live++;
      else if (now >= k.recheckAt && now >= k.expiresAt) this.keys.delete(key);
    }
    if (live === 0) this.stopSweep();
  }
}
