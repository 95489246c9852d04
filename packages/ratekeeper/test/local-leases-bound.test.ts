/**
 * What a concurrency limit's failure policy did while Redis was down (leases granted locally,
 * releases owed to Redis) is remembered until Redis answers, bounded so that a client sending
 * distinct keys during an outage cannot grow the process without end. A bound by count alone
 * (100,000 entries a table) let keys of 512 characters take ~174 MB per namespace (measured:
 * ~870 bytes an entry); the tables are bounded by their estimated bytes too, oldest forgotten
 * first, as they were by count.
 */
import { describe, expect, it } from "vitest";
import { LOCAL_LEASE_BYTES, LocalLeases, OwedReleases } from "../src/stores/redis/local-leases.js";

const longKey = (i: number) => `k${i}:`.padEnd(512, "x");
const id = (i: number) => `lease-${i}-0123456789abcdef0123456789abcdef`;

describe("the failure policy's lease tables are bounded by bytes as well as count", () => {
  it("LocalLeases: 100,000 leases on keys of 512 characters stay within the byte bound; the newest kept", () => {
    const t = new LocalLeases();
    for (let i = 0; i < 100_000; i++) t.add(longKey(i), id(i), { where: "none", expiresAt: 1, injected: false, limit: 1 });
    expect(t.bytes).toBeLessThanOrEqual(LOCAL_LEASE_BYTES);
    expect(t.held).toBeLessThan(100_000);
    expect(t.of(longKey(99_999), id(99_999))).toBeDefined();
    expect(t.of(longKey(0), id(0))).toBeUndefined();
    // Forgetting or dropping gives the bytes back.
    for (const [i, l] of [...t.toHand()]) t.drop(i, l);
    expect(t.bytes).toBe(0);
    expect(t.held).toBe(0);
  });

  it("LocalLeases: short keys keep the count bound (100,000) before the byte bound bites", () => {
    const t = new LocalLeases();
    for (let i = 0; i < 100_000; i++) t.add(`ip:${i}`, `${i}`, { where: "none", expiresAt: 1, injected: false, limit: 1 });
    expect(t.held).toBe(100_000);
  });

  it("OwedReleases: the same", () => {
    const o = new OwedReleases();
    for (let i = 0; i < 100_000; i++) o.add(id(i), { key: longKey(i), nowMs: undefined, leaseMs: 0 });
    expect(o.bytes).toBeLessThanOrEqual(LOCAL_LEASE_BYTES);
    expect(o.size).toBeLessThan(100_000);
    const taken = o.take((k) => k === longKey(99_999));
    expect(taken.map(([i]) => i)).toEqual([id(99_999)]);
    o.take(() => true);
    expect(o.bytes).toBe(0);
  });
});
