/**
 * The `"degraded"` policy's local state against eviction. While Redis is down each process limits
 * a key at its share (`limit / N`) in one bounded memory store (100,000 keys, shared by every
 * limiter of a RedisStore), and remembers what it admitted (the ledger) to charge Redis later. A
 * key left alone while 50,000-100,000 other keys arrived was dropped from that memory store, and
 * its next request started a fresh share in the same outage: a client with keys of its own to
 * spare could give any key a fresh share again and again.
 *
 * What must hold: a key with admissions in the ledger keeps its local state until Redis took them
 * (its share stays used however many keys arrive); the memory store is back within its bound once
 * the ledger is charged; keys past the ledger's bound are still admitted at a share (denying them
 * would let the same client shut every new client out during an outage), counted as unrecorded.
 */
import { describe, expect, it } from "vitest";
import { resolveLimits } from "../src/core/options.js";
import { DegradedLimiter } from "../src/stores/redis/degraded.js";
import { MemoryStore } from "../src/stores/memory.js";

const T0 = 1_700_000_000_000;
/** The ledger's bound, in keys per limiter (degraded.ts). */
const LEDGER_KEYS = 100_000;
/** Keys that arrive while the key under test is left alone: more than the local store holds. */
const OTHERS = 150_000;
/** A limit of 10 at two instances: a share of 5. */
const SPEC = { algorithm: "fixed-window", limit: 10, window: "1h" } as const;

/** A memory store as the RedisStore makes for its shares (100,000 keys), the sweep timer off. */
const localStore = () => new MemoryStore({ maxKeys: 100_000, sweepIntervalMs: 0 });

/** A degraded limiter of `spec` on `store`, N = 2, its clock injected. */
function degraded(store: MemoryStore, namespace = "t", spec: object = SPEC): DegradedLimiter {
  return new DegradedLimiter(
    resolveLimits([spec]),
    namespace,
    () => store,
    () => 2,
    { injectedClock: true },
  );
}

/** Units admitted for `key` one at a time until the first denial (at most 100). */
async function admitAll(d: DegradedLimiter, key: string): Promise<number> {
  let admitted = 0;
  while (admitted < 100 && (await d.consume(key, 1, T0)).allowed) admitted++;
  return admitted;
}

/** One unit for each of `count` keys `<prefix>0`, `<prefix>1`...; how many were admitted. */
async function flood(d: DegradedLimiter, prefix: string, count: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < count; i++) if ((await d.consume(`${prefix}${i}`, 1, T0)).allowed) admitted++;
  return admitted;
}

/** Takes every ledger entry for a charge and answers it: Redis took them all (`whole`), or not. */
async function chargeAll(d: DegradedLimiter, whole: (key: string) => boolean = () => true): Promise<void> {
  for (const [key, , at] of d.drain(() => true)) await d.charged(key, whole(key), at);
}

describe("degraded: a key with admissions in the ledger keeps its local state", () => {
  it("its share stays used while 150,000 other keys arrive", async () => {
    const store = localStore();
    const d = degraded(store);
    expect(await admitAll(d, "victim")).toBe(5);
    expect(await flood(d, "other", OTHERS)).toBe(OTHERS); // every key its share, past the ledger's bound too
    expect(await admitAll(d, "victim")).toBe(0); // not a fresh share
    // The ledger holds the victim and 99,999 others; the units of the rest are unrecorded.
    expect(d.unrecorded).toBe(OTHERS - (LEDGER_KEYS - 1));
  });

  it("once Redis took the ledger its pins are gone: the store holds its 100,000 keys and those kept after a partial charge", async () => {
    const store = localStore();
    const d = degraded(store);
    await admitAll(d, "victim");
    await flood(d, "other", OTHERS);
    expect(store.pinned).toBe(LEDGER_KEYS);
    expect(store.size).toBeGreaterThan(store.maxKeys); // the pinned keys are held on top of the bound
    // Redis took most keys' units (their local state goes); it had no room for some (theirs stays
    // pinned until it expires: degraded-partial.test.ts).
    await chargeAll(d, (key) => !key.endsWith("7"));
    expect(d.pending).toBe(false);
    expect(store.pinned).toBe(LEDGER_KEYS / 10);
    await flood(d, "later", 100_000);
    expect(store.size).toBeLessThanOrEqual(store.maxKeys + store.pinned);
    await chargeAll(d);
    expect(store.pinned).toBe(LEDGER_KEYS / 10);
    expect(store.size).toBeLessThanOrEqual(store.maxKeys + LEDGER_KEYS / 10);
  });

  it("a failed charge keeps the pin: the key's share stays used through another flood", async () => {
    const store = localStore();
    const d = degraded(store);
    await admitAll(d, "victim");
    for (const [key, units, at] of d.drain(() => true)) d.restore(key, units, at);
    await flood(d, "other", OTHERS);
    expect(await admitAll(d, "victim")).toBe(0);
    // Drained and still out (not answered): the same.
    const out = d.drain(() => true);
    await flood(d, "more", OTHERS);
    expect(await admitAll(d, "victim")).toBe(0);
    for (const [key] of out) await d.charged(key);
    expect(d.pending).toBe(false);
    expect(store.pinned).toBe(0);
  });

  it("a key past the ledger's bound is admitted at its share and counted as unrecorded", async () => {
    const store = localStore();
    const d = degraded(store);
    await flood(d, "other", LEDGER_KEYS);
    const before = d.unrecorded;
    expect(await admitAll(d, "late")).toBe(5);
    expect(d.unrecorded).toBe(before + 5);
    expect(store.pinned).toBe(LEDGER_KEYS); // memory bounded: no pin past the ledger's bound
  });

  it("a refund or a reset that empties the key's ledger entry releases its pin", async () => {
    const store = localStore();
    const d = degraded(store);
    expect(await admitAll(d, "refunded")).toBe(5);
    expect(await admitAll(d, "reset")).toBe(5);
    expect(store.pinned).toBe(2);
    for (let i = 0; i < 4; i++) await d.refund("refunded", 1, T0);
    expect(store.pinned).toBe(2); // one unit still in the ledger
    await d.refund("refunded", 1, T0);
    await d.reset("reset");
    expect(d.pending).toBe(false);
    expect(store.pinned).toBe(0);
  });
});

describe("degraded: several limiters sharing the local store", () => {
  it("limiters of other namespaces and limits: each one's ledger keys survive the others' floods", async () => {
    const store = localStore();
    const a = degraded(store, "a");
    const b = degraded(store, "b", { algorithm: "token-bucket", limit: 10, window: "1h" });
    expect(await admitAll(a, "victim")).toBe(5);
    expect(await admitAll(b, "victim")).toBe(5);
    await flood(a, "x", OTHERS / 2);
    await flood(b, "y", OTHERS / 2);
    expect(await admitAll(a, "victim")).toBe(0);
    expect(await admitAll(b, "victim")).toBe(0);
  });

  it("limiters of one namespace and limits share each key's state: it stays until both were charged", async () => {
    const store = localStore();
    const a = degraded(store);
    const b = degraded(store);
    // One share between them, as one key in Redis.
    for (let i = 0; i < 3; i++) expect((await a.consume("victim", 1, T0)).allowed).toBe(true);
    expect(await admitAll(b, "victim")).toBe(2);
    await chargeAll(a, () => false); // Redis had no room for a's units
    expect(store.pinned).toBe(1); // b's ledger still holds the key
    await flood(a, "other", OTHERS);
    expect(await admitAll(a, "victim")).toBe(0);
    await chargeAll(a);
    await chargeAll(b, () => false);
    expect(a.pending || b.pending).toBe(false);
    expect(store.pinned).toBe(1); // kept by both: Redis had no room for their units (degraded-kept.ts)
    await flood(b, "later", 100_000);
    await chargeAll(b);
    expect(store.size).toBeLessThanOrEqual(store.maxKeys + 1);
  });
});
