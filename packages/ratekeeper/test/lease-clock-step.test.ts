/**
 * Quota leasing when Redis's clock steps (NTP, a VM restored) while blocks are out (docs/leasing.md,
 * "Redis's clock stepping"). Blocks live on each process's own monotonic clock; the shared state
 * goes by Redis's. Two instances over the in-memory reference of lease.lua (the differential test
 * in lease-redis.test.ts holds the two together, with steps), each with its local clock, Redis's
 * clock apart:
 * - a step back keeps the fixed window's state (a later window start than the clock's is kept),
 *   so the window lasts longer in real time: never more than the limit in it;
 * - a step forward ends the window early for Redis (as it does per decision); blocks of the old
 *   window still serve their process until they end, on its clock: the new window admits at most
 *   its limit plus what those blocks held at the step, as after a reset.
 */
import { describe, expect, it } from "vitest";
import { resolveLimit, type BoundStore, type Decision } from "../src/index.js";
import { LeasedTable, type BlockSource } from "../src/stores/leased-table.js";
import { MemoryBlockSource, SharedState } from "./lease-source-model.js";

const lim = resolveLimit({ algorithm: "fixed-window", limit: 100, window: "10s" });

/** The per-decision path standing in: denies (no test here reaches it with room left). */
const DENY: BoundStore = {
  consume: () => ({ allowed: false, remaining: 0, retryAfterMs: 1, resetAfterMs: 1, delayMs: 0, limit: 100 }) as unknown as Decision,
  peek: () => {
    throw new Error("not expected");
  },
  refund: () => undefined,
  reset: () => undefined,
};

function setup() {
  const clocks = { redis: 1_000 * 10_000 + 5_000, local: 50_000 };
  const shared = new SharedState(lim);
  const table = (id: string) => {
    const inner = new MemoryBlockSource(shared, id, 400);
    const source: BlockSource = {
      take: (key, want) => inner.take(key, want, clocks.redis),
      give: (key, units, blockStart, epoch) => inner.give(key, units, blockStart, epoch, clocks.redis),
      enter: () => true,
      leave: () => undefined,
    };
    return new LeasedTable(lim, source, DENY, { blockMs: 100, maxKeys: 10 }, () => clocks.local);
  };
  return { clocks, a: table("a"), b: table("b") };
}

/** Admissions of `t` on "k" until its first denial (at most `max`). */
async function drain(t: LeasedTable, max = 500): Promise<number> {
  let n = 0;
  while (n < max && (await t.consume("k", 1, undefined)).allowed) n++;
  return n;
}

/** A holds a block of 50 (20 spent), taken 5 s into Redis's window. */
async function aHoldsABlock(a: LeasedTable): Promise<void> {
  await a.consume("k", 1, undefined);
  await Promise.all(Array.from({ length: 20 }, () => Promise.resolve(a.consume("k", 1, undefined))));
}

describe("quota leasing: Redis's clock steps with blocks out", () => {
  it("a step back: the window goes on, never more than its limit", async () => {
    const { clocks, a, b } = setup();
    await aHoldsABlock(a);
    let total = 21;
    clocks.redis -= 6_000; // the previous window by Redis's clock
    for (let i = 0; i < 100; i++) {
      clocks.local += 50;
      clocks.redis += 50; // 5 s: up to 1 s before the state's window ends
      total += (await drain(a)) + (await drain(b));
    }
    expect(total).toBe(100);
  });

  it("a step forward: the new window admits its limit plus at most what A's block held, and only until it ends", async () => {
    const { clocks, a, b } = setup();
    await aHoldsABlock(a); // 30 units left in A's block, which ends 100 ms from now on A's clock
    clocks.redis += 6_000; // Redis's next window
    let fresh = await drain(b);
    clocks.local += 99;
    const old = await drain(a);
    expect(old, "A's block serves it until it ends").toBe(30);
    clocks.local += 1;
    clocks.redis += 100;
    for (let i = 0; i < 50; i++) {
      fresh += (await drain(a)) + (await drain(b));
      clocks.local += 50;
      clocks.redis += 50;
    }
    expect(fresh, "taken from the new window").toBe(100);
  });
});
