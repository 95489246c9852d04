/**
 * The table of a limiter with several limits in a {@link MemoryStore}: each key is an entry of
 * slots, one per limit, decided all-or-nothing by the Evaluator (memory-table.ts has the table's
 * generations, base and rebase; the single-limit tables are in memory-kinds.ts).
 */
import type { Decision } from "../core/decision.js";
import { costTooHigh, maxCostOf } from "../core/max-cost.js";
import type { ResolvedLimit } from "../core/options.js";
import { loopNowMs } from "./loop-clock.js";
import { ENTRY_BYTES, keyBytes, ringBytes, SLOT_BYTES } from "./memory-size.js";
import { Slot, Table, type TableOwner } from "./memory-table.js";

/** One key's states, one per limit, and when they stop mattering (limiters with several limits). */
class Entry {
  /** As {@link Slot.exp}. */
  exp = 0;
  constructor(readonly s: Slot[]) {}
}

/** A limiter with several limits: each key is an {@link Entry} of slots, decided all-or-nothing. */
export class MultiTable extends Table<Entry> {
  private readonly fresh: Slot[];
  private readonly grows: boolean;
  /** The most these limits could ever admit (core/max-cost.ts): a larger cost is refused before any key is looked up or made. */
  private readonly maxCost: number;

  constructor(store: TableOwner, limits: readonly ResolvedLimit[]) {
    super(store, limits);
    this.fresh = this.create().s;
    this.grows = limits.some((l) => l.algorithm === "sliding-log");
    this.maxCost = maxCostOf(limits);
  }

  consume(key: string, cost: number, nowMs: number | undefined, maxDelayMs?: number): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    const e = this.young.get(key) ?? this.adopt(key, now);
    if (e.exp <= rel) this.ev.clear(e.s);
    const before = this.grows ? slotsBytes(e.s) : 0;
    const d = this.ev.run(e.s, rel, cost, true, maxDelayMs);
    if (d.allowed) e.exp = Math.ceil(rel + this.ev.ttlMs);
    if (this.grows) {
      const after = slotsBytes(e.s);
      if (after !== before) this.grew(after - before, key);
    }
    return d;
  }

  peek(key: string, cost: number, nowMs: number | undefined): Decision {
    if (cost > this.maxCost) throw costTooHigh(cost, this.maxCost);
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    return this.ev.run(this.live(key, now)?.s ?? this.fresh, rel, cost, false);
  }

  refund(key: string, cost: number, nowMs: number | undefined): void {
    const now = nowMs ?? loopNowMs();
    const rel = this.relOf(now);
    const e = this.live(key, now);
    if (e !== undefined) this.ev.refund(e.s, rel, cost);
  }

  protected create(): Entry {
    return new Entry(this.ev.init().map((st) => new Slot(st)));
  }

  protected clear(e: Entry): void {
    this.ev.clear(e.s);
  }

  protected bytesOf(key: string, e: Entry): number {
    return ENTRY_BYTES + keyBytes(key) + slotsBytes(e.s);
  }
}

/** Estimated bytes of a key's slots, with their rings. */
function slotsBytes(slots: readonly Slot[]): number {
  let b = 0;
  for (const s of slots) b += SLOT_BYTES + 8 + ringBytes(s);
  return b;
}
