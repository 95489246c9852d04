/**
 * A rules reload that changes a concurrency pool's limit keeps the leases already held, on the
 * service's default store (memory) as on Redis (docs/concurrency.md): the service makes a new
 * ConcurrencyLimiter for the pool, on the pool's namespace, and it must see those leases. The
 * service's lease logic is driven directly (no process, no sockets).
 */
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import type { ConcurrencyPool } from "../src/config/pools.js";
import type { Rules } from "../src/config/rules.js";
import { LeaseService } from "../src/service/leases.js";

function rulesWith(...pools: ConcurrencyPool[]): Rules {
  return { pools: new Map(pools.map((p) => [p.name, p])) } as unknown as Rules;
}

describe("lease pools across a reload, memory store", () => {
  it("a raised limit grants only the slots it added; a lowered one grants none until enough are released", async () => {
    let rules = rulesWith({ name: "reports", limit: 2, leaseMs: 60_000 });
    const leases = new LeaseService(new MemoryStore({ sweepIntervalMs: 0 }), () => rules);
    const body = { pool: "reports", key: "tenant:7" };
    const held = [await leases.acquire(body), await leases.acquire(body)];
    expect(held.map((g) => g.acquired)).toEqual([true, true]);

    rules = rulesWith({ name: "reports", limit: 3, leaseMs: 60_000 });
    expect(await leases.acquire(body)).toMatchObject({ acquired: true, limit: 3, remaining: 0 });
    expect(await leases.acquire(body)).toMatchObject({ acquired: false, reason: "limit" });

    rules = rulesWith({ name: "reports", limit: 1, leaseMs: 30_000 });
    expect(await leases.acquire(body)).toMatchObject({ acquired: false, reason: "limit" });
    // The leases granted before the reloads are renewed and released under the new rules.
    expect(await leases.renew({ ...body, id: held[0]?.id })).toBe(true);
    expect(await leases.release({ ...body, id: held[0]?.id })).toBe(true);
    expect(await leases.release({ ...body, id: held[1]?.id })).toBe(true);
    expect(await leases.acquire(body)).toMatchObject({ acquired: false, reason: "limit" }); // the third is still held
  });
});
