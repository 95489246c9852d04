import type { Decision } from "../../core/decision.js";
import { describeValue, RateLimitStoreError } from "../../core/errors.js";
import type { ResolvedLimit } from "../../core/options.js";
import type { DegradedLimiter } from "./degraded.js";
import { redisDown, RedisTimeoutError, type Lane } from "./lanes.js";
import { ScriptFormat } from "./script-format.js";
import { namingKeys } from "./client.js";
import { foreignMarker, foreignValueError, ForeignValueError } from "./foreign-value.js";
import type { RedisTable } from "./table.js";

/** Reconciliation calls in flight at once, per limiter. */
const RECONCILE_CONCURRENCY = 64;

/** A consume of every limit at once by the table's ordinary path (batched, fast path): its decision. */
export type ConsumeAll = (key: string, cost: number, nowMs: number | undefined) => Promise<Decision>;

/**
 * Charges Redis with what one limiter's `"degraded"` policy admitted while a lane was down
 * (degraded.ts keeps the ledger), key by key: on every limit, the units admitted, or as many as
 * the key has room for there.
 *
 * A limiter of one limit is charged by its ordinary consume. One of several limits is charged
 * limit by limit, each alone on its own Redis key: a consume of every limit at once is all or
 * nothing and takes at most the smallest capacity, while an outage over several windows of a
 * short limit (10 a second) admits more than that inside one window of a long one (100 an hour),
 * which was then charged only 10 of its units and gave the key the rest again after the outage.
 */
export class Reconciler {
  /** With several limits: each one's own call format (one limit, its key of the table's keys). */
  private readonly alone: ScriptFormat[] | undefined;

  constructor(
    private readonly table: RedisTable,
    private readonly limits: readonly ResolvedLimit[],
    namespace: string,
    private readonly degraded: () => DegradedLimiter | undefined,
    private readonly consumeAll: ConsumeAll,
  ) {
    const o = table.store.opts;
    if (limits.length > 1) this.alone = limits.map((l) => new ScriptFormat([l], o.prefix, namespace, o.minTtlMs));
  }

  /** Charges the ledger's keys of `lane` (its breaker closed, or a failed call's lane answers). */
  async reconcile(lane: Lane): Promise<void> {
    const d = this.degraded();
    if (d === undefined) return;
    const store = this.table.store;
    const entries = d.drain((key) => store.lanes.of(this.table.keysOf(key)[0] as string) === lane);
    for (let i = 0; i < entries.length; i += RECONCILE_CONCURRENCY) {
      await Promise.all(entries.slice(i, i + RECONCILE_CONCURRENCY).map(([key, units, nowMs]) => this.charge(d, key, units, nowMs)));
    }
    if (!d.pending) store.ledgerEmpty(this.table);
  }

  /** Charges `units` of `key` at `nowMs`, the injected time they were admitted at (else Redis's time). */
  private async charge(d: DegradedLimiter, key: string, units: number, nowMs: number | undefined): Promise<void> {
    const store = this.table.store;
    let whole = true;
    try {
      if (this.alone === undefined) whole = await this.chargeAll(key, units, nowMs);
      else for (let i = 0; i < this.alone.length; i++) if (!(await this.chargeOne(i, key, units, nowMs))) whole = false;
    } catch (e) {
      const named = namingKeys(e, this.table.keysOf(key));
      if (named instanceof ForeignValueError) {
        // Redis answered: a key of this key's holds a value the store did not write, and every
        // charge will be refused until someone deletes it. Retried as a failure (back to the
        // ledger, again in 100 ms), it was reported ten times a second for good and the ledger
        // never emptied. Given up as a charge Redis had no room for: reported once, the local
        // state, which counts the units, stays until it expires (a limit of several may have
        // taken its units).
        store.report(named, { op: "reconcile", key, timedOut: false });
        await d.charged(key, false, nowMs);
        return;
      }
      // Redis did not take them (a limit of several may have: charged again, stricter, never
      // looser; a late reply is refunded).
      d.restore(key, units, nowMs);
      store.report(e, { op: "reconcile", key, timedOut: e instanceof RedisTimeoutError });
      store.reconcileSoon(store.lanes.of(this.table.keysOf(key)[0] as string));
      return;
    }
    // Redis holds the key again: its local state goes now, not at the drain (a failed charge
    // keeps it); unless Redis had no room for some of the units (degraded.ts `charged`).
    await d.charged(key, whole, nowMs);
  }

  /**
   * One limit: `units`, or as many as the key has room for (a consume takes at most the
   * capacity). Whether Redis took them all.
   */
  private async chargeAll(key: string, units: number, nowMs: number | undefined): Promise<boolean> {
    const cap = (this.limits[0] as ResolvedLimit).capacity;
    const first = await this.consumeAll(key, Math.min(units, cap), nowMs);
    if (!first.allowed && first.remaining > 0) await this.consumeAll(key, first.remaining, nowMs);
    return first.allowed && units <= cap;
  }

  /** Limit `i` of several, alone on its key: `units`, or as many as it has room for. Whether all. */
  private async chargeOne(i: number, key: string, units: number, nowMs: number | undefined): Promise<boolean> {
    const keys = [this.table.keysOf(key)[i] as string];
    const cap = (this.limits[i] as ResolvedLimit).capacity;
    const first = await this.send(i, keys, "c", Math.min(units, cap), nowMs);
    if (!first.allowed && first.remaining > 0) await this.send(i, keys, "c", first.remaining, nowMs);
    return first.allowed && units <= cap;
  }

  /**
   * One script call of limit `i` alone (ratekeeper.lua's general layout, one limit): its
   * decision. At Redis's time (TIME) when `nowMs` is undefined. A consume whose reply comes after
   * the watchdog gave it up is refunded: its units went back to the ledger, to be charged again.
   */
  private async send(i: number, keys: string[], mode: "c" | "r", cost: number, nowMs: number | undefined): Promise<Decision> {
    const store = this.table.store;
    const f = (this.alone as ScriptFormat[])[i] as ScriptFormat;
    const lane = store.lanes.of(keys[0] as string);
    if (lane.breaker.state !== "closed") throw redisDown();
    const args = [...f.head, mode, nowMs === undefined ? "" : String(nowMs), String(cost)];
    if ((this.limits[i] as ResolvedLimit).shape) args.push("");
    const late = (r: unknown) => {
      if (mode !== "c" || !Array.isArray(r) || Number(r[0]) !== 1) return;
      this.send(i, keys, "r", cost, nowMs).catch((e: unknown) =>
        store.report(e, { op: "refund", key: keys[0] as string, timedOut: e instanceof RedisTimeoutError }),
      );
    };
    const reply = await store.exchange(lane, () => store.run(lane, this.table.script, keys, args), 1, late);
    if (!Array.isArray(reply) || reply.length < 5)
      throw new RateLimitStoreError(`RedisStore: unexpected script reply ${describeValue(reply)}`);
    const bad = foreignMarker(reply[0]);
    if (bad !== undefined) throw foreignValueError(bad);
    return f.decision(reply, cost);
  }
}
