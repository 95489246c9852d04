/**
 * The reference for quota leasing's shared side: blocks taken from and given back to a key's
 * state in memory, by core/lease-block.ts, with the key's lessees counted as lease.lua counts
 * them. One {@link MemoryBlockSource} per simulated instance, all over one {@link SharedState}.
 */
import { giveBack, newBlockOutcome, takeBlock, type BlockOutcome } from "../src/core/lease-block.js";
import type { LimitState } from "../src/core/algorithms/types.js";
import type { ResolvedLimit } from "../src/core/options.js";
import type { BoundStore } from "../src/store.js";
import type { BlockSource } from "../src/stores/leased-table.js";

/**
 * The unleased table of a LeasedTable in tests where it must not be asked: it is used only for
 * peeks and when the source fails, which these tests never do.
 */
export const UNUSED: BoundStore = {
  consume: () => {
    throw new Error("not expected");
  },
  peek: () => {
    throw new Error("not expected");
  },
  refund: () => undefined,
  reset: () => undefined,
};

/** The state every instance shares: per key, the limit's state and when each instance last took a block. */
export class SharedState {
  readonly states = new Map<string, LimitState>();
  readonly lessees = new Map<string, Map<string, number>>();
  /** Per key, its reset epoch (absent: 0), as ratekeeper.lua's reset raises it: max(old + 1, now). */
  readonly epochs = new Map<string, number>();
  takes = 0;
  gives = 0;
  constructor(readonly lim: ResolvedLimit) {}

  /** A reset of `key` at `nowMs`: its state is forgotten and its epoch raised. */
  reset(key: string, nowMs: number): void {
    this.states.delete(key);
    this.epochs.set(key, Math.max((this.epochs.get(key) ?? 0) + 1, nowMs));
  }
}

export class MemoryBlockSource implements BlockSource {
  constructor(
    private readonly shared: SharedState,
    private readonly id: string,
    private readonly horizonMs: number,
  ) {}

  /** What take() would answer now, synchronously (the differential test compares it with Redis). */
  takeNow(key: string, want: number, nowMs: number): BlockOutcome & { lessees: number } {
    const sh = this.shared;
    sh.takes++;
    const ls = sh.lessees.get(key) ?? new Map<string, number>();
    sh.lessees.set(key, ls);
    ls.set(this.id, nowMs);
    for (const [id, at] of ls) if (at <= nowMs - this.horizonMs) ls.delete(id);
    const s = sh.states.get(key) ?? { a: 0, b: 0, ring: null };
    const out = newBlockOutcome();
    takeBlock(s, nowMs, want, ls.size, sh.lim, out);
    if (out.taken > 0) sh.states.set(key, s);
    out.epoch = sh.epochs.get(key) ?? 0;
    return { ...out, lessees: ls.size };
  }

  /** As lease.lua: nothing goes back into a state that expired, or into a key reset since the block's take (`epoch`). */
  giveNow(key: string, units: number, blockStart: number, epoch: number, nowMs: number): void {
    const sh = this.shared;
    sh.gives++;
    const s = sh.states.get(key);
    if (s !== undefined && epoch === (sh.epochs.get(key) ?? 0)) giveBack(s, nowMs, units, blockStart, sh.lim);
  }

  take(key: string, want: number, nowMs: number | undefined): Promise<BlockOutcome> {
    const { lessees: _lessees, ...out } = this.takeNow(key, want, nowMs as number);
    return Promise.resolve(out);
  }

  /** No bound on decisions waiting: the reference stands for a store that always has room. */
  enter(): boolean {
    return true;
  }

  leave(): void {}

  give(key: string, units: number, blockStart: number, epoch: number, nowMs: number | undefined): Promise<void> {
    this.giveNow(key, units, blockStart, epoch, nowMs as number);
    return Promise.resolve();
  }
}
