/**
 * The service's limiters of override policies (an override may carry its own limits: a partner's
 * plan). Each distinct policy gets a limiter, and one made is ~2 KB with its memory store table;
 * overrides come and go (expire, are deleted, get new limits) for the life of the service, so the
 * limiters of policies no override uses any more must not be held for good. Letting one go loses
 * nothing: its counts live in the store under its limits, and a limiter made again finds them.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { LimiterCache, MAX_OVERRIDE_LIMITERS } from "../src/service/limiters.js";
import type { Override } from "../src/overrides/types.js";

const override = (limit: number): Override => ({
  domain: "d",
  key: `k${limit}`,
  policy: { limits: [{ algorithm: "fixed-window", limit, window: "1h" }] },
});

describe("LimiterCache: override policies", () => {
  it("holds a bounded number of limiters of policies seen once, however many come and go", () => {
    const cache = new LimiterCache(new MemoryStore(), () => 1_000_000);
    for (let i = 1; i <= 3 * MAX_OVERRIDE_LIMITERS; i++) cache.forOverride(override(1000 + i));
    expect((cache as unknown as { byOverrideJson: Map<string, unknown> }).byOverrideJson.size).toBeLessThanOrEqual(MAX_OVERRIDE_LIMITERS);
  });

  it("a limiter let go and made again finds the counts of its policy; a live override keeps its own", async () => {
    const cache = new LimiterCache(new MemoryStore(), () => 1_000_000);
    const live = override(7);
    const first = cache.forOverride(live);
    if (first instanceof Error) throw first;
    for (let i = 0; i < 3; i++) await first.consume("d|k");
    for (let i = 1; i <= 2 * MAX_OVERRIDE_LIMITERS; i++) cache.forOverride(override(1000 + i));
    // The live override's policy object still reaches its limiter.
    expect(cache.forOverride(live)).toBe(first);
    // An equal policy read again from the store (a new object): a limiter, with the same counts.
    const again = cache.forOverride(override(7));
    if (again instanceof Error) throw again;
    expect((await again.consume("d|k")).remaining).toBe(3);
  });
});
