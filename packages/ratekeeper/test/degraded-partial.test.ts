/**
 * The `"degraded"` policy's local state of a key that Redis only partly took. After an outage the
 * store charges Redis with what each process admitted alone; when Redis had no room for all of a
 * key's units (the key used up there too), Redis does not count the rest, so the local state,
 * which does, is kept until it expires: otherwise the key got a fresh share at each later outage
 * in the same window, on top of a Redis that is already full.
 *
 * What must hold: that kept state survives a flood of other keys in a later outage (as a ledger
 * key's does: degraded-eviction.test.ts); the kept keys are bounded (100,000 per limiter, apart
 * from the ledger's); a kept state goes once it has expired, or when the key is reset or Redis
 * later takes all of its units.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { resolveLimits } from "../src/core/options.js";
import { DegradedLimiter } from "../src/stores/redis/degraded.js";
import { MemoryStore } from "../src/stores/memory.js";

/** The ledger's bound, in keys per limiter (degraded.ts), and the kept keys' (degraded-kept.ts). */
const LEDGER_KEYS = 100_000;
const KEPT_KEYS = 100_000;
/**
 * Keys that arrive in a later outage: the ledger's bound (their states pinned), then more than
 * the local store holds (their states not recorded, in the store's generations, turning them).
 */
const OTHERS = LEDGER_KEYS + 150_000;
/** A limit of 10 an hour at two instances: a share of 5. */
const SPEC = { algorithm: "fixed-window", limit: 10, window: "1h" } as const;
const HOUR = 3_600_000;

/** A memory store as the RedisStore makes for its shares (100,000 keys), the sweep timer off. */
const localStore = () => new MemoryStore({ maxKeys: 100_000, sweepIntervalMs: 0 });

/** A degraded limiter of SPEC on `store`, N = 2, on the store's own clock (Date.now()). */
function degraded(store: MemoryStore): DegradedLimiter {
  return new DegradedLimiter(
    resolveLimits([SPEC]),
    "t",
    () => store,
    () => 2,
  );
}

async function admitAll(d: DegradedLimiter, key: string): Promise<number> {
  let admitted = 0;
  while (admitted < 100 && (await d.consume(key, 1, undefined)).allowed) admitted++;
  return admitted;
}

async function flood(d: DegradedLimiter, prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await d.consume(`${prefix}${i}`, 1, undefined);
}

/** Takes the ledger's entries for a charge: Redis took all of each key's units when `whole(key)`, else not all. */
async function chargeAll(d: DegradedLimiter, whole: (key: string) => boolean = () => true): Promise<void> {
  for (const [key] of d.drain(() => true)) await d.charged(key, whole(key));
}

afterEach(() => {
  vi.useRealTimers();
});

describe("degraded: a key Redis only partly took keeps its local state", () => {
  it("through a flood of 250,000 other keys in a later outage: no fresh share", async () => {
    const store = localStore();
    const d = degraded(store);
    expect(await admitAll(d, "victim")).toBe(5);
    await chargeAll(d, () => false); // Redis was full for the key: it took none or some
    expect(d.pending).toBe(false);
    await flood(d, "other", OTHERS); // the next outage, in the same window
    expect(await admitAll(d, "victim")).toBe(0);
    expect(store.pinned).toBe(LEDGER_KEYS + 1); // the ledger's keys, and the victim
  });

  it("kept keys have a bound of their own: the oldest gives way; ledger keys are recorded as ever", async () => {
    const store = localStore();
    const d = degraded(store);
    await flood(d, "partial", KEPT_KEYS);
    await chargeAll(d, () => false);
    expect(store.pinned).toBe(KEPT_KEYS);
    const unrecorded = d.unrecorded;
    expect(await admitAll(d, "new")).toBe(5);
    expect(d.unrecorded).toBe(unrecorded); // recorded, to be charged to Redis
    expect(store.pinned).toBe(KEPT_KEYS + 1);
    await chargeAll(d, () => false); // "new" is kept too: "partial0", kept longest, gives way
    expect(store.pinned).toBe(KEPT_KEYS);
    expect(await admitAll(d, "new")).toBe(0);
    expect(store.size).toBeLessThanOrEqual(store.maxKeys + store.pinned);
  });

  it("lets go once the local state has expired", async () => {
    vi.useFakeTimers({ now: Date.UTC(2026, 0, 1, 10, 30) }); // half an hour into the window
    const store = localStore();
    const d = degraded(store);
    await admitAll(d, "victim");
    await chargeAll(d, () => false);
    expect(store.pinned).toBe(1);
    await vi.advanceTimersByTimeAsync(HOUR / 4);
    expect(store.pinned).toBe(1); // still live: the window ends at 11:00
    await vi.advanceTimersByTimeAsync(HOUR);
    expect(store.pinned).toBe(0);
    expect(vi.getTimerCount()).toBe(0); // no timer left behind
    expect(await admitAll(d, "victim")).toBe(5); // a new window: a fresh share, rightly
  });

  it("lets go when the key is reset, or when Redis later takes all of its units", async () => {
    const store = localStore();
    const d = degraded(store);
    await admitAll(d, "reset");
    await admitAll(d, "whole");
    await chargeAll(d, () => false);
    expect(store.pinned).toBe(2);
    await d.reset("reset");
    expect(store.pinned).toBe(1);
    await d.refund("whole", 5, undefined); // room again locally: a later outage admits it ...
    expect(await admitAll(d, "whole")).toBe(5);
    expect(store.pinned).toBe(1); // ... and its ledger entry shares the key's pin
    await chargeAll(d, () => true); // ... and this time Redis took them all
    expect(store.pinned).toBe(0);
    expect(d.pending).toBe(false);
  });
});
