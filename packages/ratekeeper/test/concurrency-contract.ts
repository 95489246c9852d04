/**
 * The concurrency contract: one suite for ConcurrencyLimiter, run against every store
 * (memory-contract.test.ts, redis-contract.test.ts). A manual clock is injected; no sleeps. Each
 * test uses its own namespace.
 */
import { describe, expect, it } from "vitest";
import { ConcurrencyLimiter, type Lease } from "../src/index.js";
import type { ContractTarget } from "./contract.js";

let seq = 0;
const uniq = () => `cc${process.pid}-${++seq}`;

function setup(target: ContractTarget, limit: number, leaseMs = 10_000, t0 = 1_763_740_800_123) {
  const clock = { now: t0 };
  const namespace = uniq();
  const make = () => new ConcurrencyLimiter({ limit, leaseMs, store: target.store(), clock: () => clock.now, namespace });
  return { pool: make(), make, clock };
}

/** Runs the concurrency contract against `target`. */
export function concurrencyContract(target: ContractTarget): void {
  describe("ConcurrencyLimiter", () => {
    it("grants `limit` leases on a key, then refuses with the time until the earliest expires", async () => {
      const { pool, clock } = setup(target, 3);
      const leases: Lease[] = [];
      for (let i = 0; i < 3; i++) {
        leases.push(await pool.acquire("k"));
        clock.now += 10;
      }
      expect(leases.map((l) => [l.acquired, l.remaining, l.retryAfterMs, l.reason])).toEqual([
        [true, 2, 0, undefined],
        [true, 1, 0, undefined],
        [true, 0, 0, undefined],
      ]);
      expect(new Set(leases.map((l) => l.id)).size).toBe(3);
      const refused = await pool.acquire("k");
      expect(refused).toMatchObject({ acquired: false, remaining: 0, retryAfterMs: 10_000 - 30, reason: "limit", id: "", limit: 3 });
      expect((await pool.acquire("other")).acquired).toBe(true);
      // retryAfterMs is truthful: a tick before it the key is still full, at it a slot is free.
      clock.now += refused.retryAfterMs - 1;
      expect((await pool.acquire("k")).acquired).toBe(false);
      clock.now += 1;
      expect((await pool.acquire("k")).acquired).toBe(true);
    });

    it("release frees the slot at once; releasing twice (or a refused lease) changes nothing", async () => {
      const { pool } = setup(target, 2);
      const a = await pool.acquire("k");
      const b = await pool.acquire("k");
      const refused = await pool.acquire("k");
      expect([a.acquired, b.acquired, refused.acquired]).toEqual([true, true, false]);
      await refused.release();
      await a.release();
      await a.release();
      expect(await pool.peek("k")).toEqual({ remaining: 1, retryAfterMs: 0, reason: undefined });
      const c = await pool.acquire("k");
      expect(c.acquired).toBe(true);
      await a.release(); // a's id is gone: c's slot stays held
      expect((await pool.acquire("k")).acquired).toBe(false);
      await Promise.all([b.release(), c.release()]);
      expect(await pool.peek("k")).toEqual({ remaining: 2, retryAfterMs: 0, reason: undefined });
    });

    it("a lease not renewed expires leaseMs after its acquire (a crashed holder's slot comes back)", async () => {
      const { pool, make, clock } = setup(target, 2, 5_000);
      const a = await pool.acquire("k");
      const b = await make().acquire("k"); // another limiter (another process) on the same store
      expect([a.acquired, b.acquired]).toEqual([true, true]);
      clock.now += 4_999;
      expect(await pool.peek("k")).toEqual({ remaining: 0, retryAfterMs: 1, reason: undefined });
      clock.now += 1;
      expect(await pool.peek("k")).toEqual({ remaining: 2, retryAfterMs: 0, reason: undefined });
      expect(await a.renew()).toBe(false); // its slot may be someone else's now
      expect((await pool.acquire("k")).acquired).toBe(true);
    });

    it("renew extends a held lease to leaseMs from now", async () => {
      const { pool, clock } = setup(target, 1, 5_000);
      const a = await pool.acquire("k");
      clock.now += 4_000;
      expect(await a.renew()).toBe(true);
      clock.now += 4_000; // 8 s after the acquire, 4 s after the renew: still held
      expect(await pool.acquire("k")).toMatchObject({ acquired: false, retryAfterMs: 1_000 });
      await a.release();
      expect(await a.renew()).toBe(false); // released leases are not renewed
      expect((await pool.acquire("k")).acquired).toBe(true);
    });

    it("renew and release by id (a holder that kept only the id, in another process); ids cannot be guessed from another's", async () => {
      const { pool, make, clock } = setup(target, 2, 5_000);
      const a = await pool.acquire("k");
      const b = await pool.acquire("k");
      const elsewhere = make(); // another process sharing the store, holding only the ids
      clock.now += 4_000;
      expect(await elsewhere.renew("k", a.id)).toBe(true);
      clock.now += 4_000; // a renewed 4 s ago; b acquired 8 s ago and expired
      expect(await elsewhere.renew("k", b.id)).toBe(false);
      expect(await pool.peek("k")).toMatchObject({ remaining: 1 });
      expect(await elsewhere.release("other", a.id)).toBe(false); // the id is per key
      expect(await elsewhere.release("k", a.id)).toBe(true);
      expect(await elsewhere.release("k", a.id)).toBe(false); // idempotent
      expect(await pool.peek("k")).toMatchObject({ remaining: 2 });
      // Consecutive ids share the process's prefix but differ in 48 random bits as well as the counter.
      const [x, y] = [await pool.acquire("z"), await pool.acquire("z")];
      expect(x.id.split(".")[1]).not.toBe(y.id.split(".")[1]);
      await expect(pool.release("k", "guess")).rejects.toThrow(/lease id: must be the id of an acquired lease/);
      await expect(pool.renew("k", "")).rejects.toThrow(/lease id/);
    });

    it("limiters with the same namespace and limit share leases; other namespaces do not", async () => {
      const { make } = setup(target, 1);
      const first = await make().acquire("k");
      expect(first.acquired).toBe(true);
      expect((await make().acquire("k")).acquired).toBe(false);
      const other = new ConcurrencyLimiter({ limit: 1, store: target.store(), namespace: uniq() });
      expect((await other.acquire("k")).acquired).toBe(true);
    });

    it("limiters with the same namespace share leases whatever their limits (a reload that changes the limit keeps those held)", async () => {
      const clock = { now: 1_763_740_800_123 };
      const namespace = uniq();
      const pool = (limit: number) =>
        new ConcurrencyLimiter({ limit, leaseMs: 10_000, store: target.store(), clock: () => clock.now, namespace });
      const two = pool(2);
      const [a, b] = [await two.acquire("k"), await two.acquire("k")];
      expect([a.acquired, b.acquired]).toEqual([true, true]);
      // The limit raised to 3: one more slot, not 3 on top of the 2 held.
      const three = pool(3);
      expect(await three.peek("k")).toEqual({ remaining: 1, retryAfterMs: 0, reason: undefined });
      expect(await three.acquire("k")).toMatchObject({ acquired: true, remaining: 0 });
      expect(await three.acquire("k")).toMatchObject({ acquired: false, reason: "limit", retryAfterMs: 10_000 });
      // Lowered to 1: nothing until two of the three held are gone; the held ones are renewed and released there.
      const one = pool(1);
      expect((await one.acquire("k")).acquired).toBe(false);
      expect(await one.renew("k", a.id)).toBe(true);
      expect(await one.release("k", a.id)).toBe(true);
      await b.release();
      expect(await one.peek("k")).toEqual({ remaining: 0, retryAfterMs: 10_000, reason: undefined });
      clock.now += 10_000; // the third lease expires
      expect((await one.acquire("k")).acquired).toBe(true);
    });

    it("limiters of different namespaces share no lease, whatever characters namespaces and keys hold", async () => {
      const base = uniq();
      const pool = (namespace: string) => new ConcurrencyLimiter({ limit: 1, leaseMs: 10_000, store: target.store(), namespace });
      // In Redis a lease key is <prefix>{<namespace>:<key>}:c, so namespace "n" with key "b:x" and
      // namespace "n:b" with key "x" must not meet in one key (a client choosing its key would
      // take another pool's slots).
      expect((await pool(base).acquire("b:x")).acquired).toBe(true);
      expect((await pool(`${base}:b`).acquire("x")).acquired).toBe(true);
      expect((await pool(`${base}%3Ab`).acquire("x")).acquired).toBe(true);
      expect((await pool(`${base}:b:c`).acquire("d")).acquired).toBe(true);
      expect((await pool(`${base}:b`).acquire("c:d")).acquired).toBe(true);
      expect((await pool(`${base}:b`).acquire("x")).acquired).toBe(false); // the same pool and key still share
    });

    it("refuses bad keys with a RangeError naming the key", async () => {
      const { pool } = setup(target, 1);
      await expect(pool.acquire("")).rejects.toThrow(/key: must be a non-empty string/);
      await expect(pool.acquire("\ud800")).rejects.toThrow(/key: has a lone surrogate/);
      await expect(pool.peek(5 as unknown as string)).rejects.toThrow(RangeError);
    });
  });
}
