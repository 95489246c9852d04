/**
 * The lease table (core/leases.ts) against a plain list of (id, expiry): the same random
 * acquires, renews, releases and counts, at random times (the clock may step back), give the same
 * answers, field for field; and at no time are more than `limit` leases held. Manual time only.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseSet, newLeaseOutcome } from "../src/core/leases.js";
import { LeaseModel, leaseOpsArb } from "./lease-model.js";

describe("LeaseSet against its reference model", () => {
  it("answers every acquire, renew, release and count as the model does; never holds more than the limit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 2 ** 41 }),
        fc.integer({ min: 1, max: 5000 }).chain((leaseMs) => fc.tuple(fc.constant(leaseMs), leaseOpsArb(leaseMs))),
        (limit, t0, [leaseMs, ops]) => {
          const set = new LeaseSet();
          const model = new LeaseModel();
          const out = newLeaseOutcome();
          let t = t0;
          for (const op of ops) {
            t += op.dt;
            switch (op.kind) {
              case "acquire":
                set.acquire(t, `L${op.id}`, limit, leaseMs, out);
                expect(out).toEqual(model.acquire(t, `L${op.id}`, limit, leaseMs));
                break;
              case "renew":
                expect(set.renew(t, `L${op.id}`, leaseMs)).toBe(model.renew(t, `L${op.id}`, leaseMs));
                break;
              case "release":
                expect(set.release(t, `L${op.id}`)).toBe(model.release(t, `L${op.id}`));
                break;
              case "count":
                set.count(t, limit, out);
                expect(out).toEqual(model.count(t, limit));
                break;
            }
            expect(set.held(t)).toBe(model.leases.filter((l) => l.exp > t).length);
            expect(set.held(t)).toBeLessThanOrEqual(limit);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("a lease is held until exactly leaseMs after its acquire or renew, then its slot is free", () => {
    const set = new LeaseSet();
    const out = newLeaseOutcome();
    set.acquire(1000, "a", 1, 100, out);
    expect(out).toEqual({ ok: true, remaining: 0, retryAfterMs: 0, held: 1 });
    set.acquire(1099, "b", 1, 100, out);
    expect(out).toEqual({ ok: false, remaining: 0, retryAfterMs: 1, held: 1 });
    expect(set.renew(1050, "a", 100)).toBe(true); // now held until 1150
    set.acquire(1149, "b", 1, 100, out);
    expect(out.retryAfterMs).toBe(1);
    set.acquire(1150, "b", 1, 100, out);
    expect(out.ok).toBe(true);
    expect(set.renew(1150, "a", 100)).toBe(false); // a's slot went to b
    expect(set.release(1150, "a")).toBe(false);
    expect(set.release(1151, "b")).toBe(true);
    expect(set.release(1151, "b")).toBe(false); // idempotent
    expect(set.held(1151)).toBe(0);
  });

  it("stays O(1) per call while nothing expires: a full table answers a denial from its earliest expiry", () => {
    const set = new LeaseSet();
    const out = newLeaseOutcome();
    for (let i = 0; i < 1000; i++) set.acquire(i, `L${i}`, 1000, 60_000, out);
    set.acquire(1000, "late", 1000, 60_000, out);
    expect(out).toEqual({ ok: false, remaining: 0, retryAfterMs: 59_000, held: 1000 });
    set.release(1001, "L0"); // the earliest leaves: the next denial must name L1's expiry
    set.acquire(1002, "x", 1000, 60_000, out);
    expect(out.ok).toBe(true);
    set.acquire(1003, "y", 1000, 60_000, out);
    expect(out.retryAfterMs).toBe(60_001 - 1003);
  });
});
