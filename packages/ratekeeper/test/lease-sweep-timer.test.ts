/**
 * Quota leasing's sweep timer (stores/leased-table.ts) runs every `blockMs`: a `blockMs` longer
 * than a timer holds (2^31 - 1 ms, about 24.8 days) must not reach setInterval, which node then
 * runs every millisecond. Over the in-memory reference source; the delay asked for is read from a
 * spy, nothing waits.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { resolveLimit } from "../src/index.js";
import { LeasedTable } from "../src/stores/leased-table.js";
import { MemoryBlockSource, SharedState, UNUSED } from "./lease-source-model.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("quota leasing, a block of a very long life", () => {
  it("never asks for a sweep interval past what timers hold", async () => {
    const lim = resolveLimit({ algorithm: "fixed-window", limit: 100, window: "365d" });
    const blockMs = 30 * 86_400_000; // 30 days
    const spy = vi.spyOn(globalThis, "setInterval");
    const table = new LeasedTable(lim, new MemoryBlockSource(new SharedState(lim), "i0", 4 * blockMs), UNUSED, { blockMs, maxKeys: 10 });
    const d = await table.consume("k", 1, undefined);
    expect(d.allowed).toBe(true);
    const delays = spy.mock.calls.map((c) => c[1] ?? 0);
    expect(delays.length).toBe(1); // the sweep started with the first block
    for (const ms of delays) expect(ms).toBeLessThanOrEqual(2_147_483_647);
    await table.close();
  });
});
