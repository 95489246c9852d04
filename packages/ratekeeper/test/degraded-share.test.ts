/**
 * The `"degraded"` policy's local share when the live instance count N changes while keys are
 * limited locally. N comes from the instances' heartbeat in Redis, which can keep answering while
 * a key's own calls fail (a Redis Cluster with one node down: the registry's slot lives elsewhere),
 * so N can move in the middle of an outage (a deploy, an autoscaler, a crash).
 *
 * The share is `limit / N`. Re-cut at a new N with a fresh local state, every key got a whole new
 * share on top of what it had already used: N going 4 -> 3 let one process admit 25 + 33 of a
 * limit of 100 in one window, and the three survivors together 199. The share must stay the one
 * the key's admissions were counted at until they have been charged to Redis.
 */
import { describe, expect, it } from "vitest";
import { resolveLimits } from "../src/core/options.js";
import { DegradedLimiter } from "../src/stores/redis/degraded.js";
import { MemoryStore } from "../src/stores/memory.js";

const T0 = 1_700_000_000_000;

/** A degraded limiter over a fresh memory store, its clock injected at `T0`, N set by `n.value`. */
function setup(spec: object) {
  const n = { value: 4 };
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  const d = new DegradedLimiter(
    resolveLimits([spec]),
    "t",
    () => store,
    () => n.value,
    { injectedClock: true },
  );
  /** Units admitted for `key` one at a time until the first denial (at most 1,000). */
  async function admitAll(key: string): Promise<number> {
    let admitted = 0;
    while (admitted < 1_000 && (await d.consume(key, 1, T0)).allowed) admitted++;
    return admitted;
  }
  return { n, d, admitAll };
}

describe("degraded: the local share while N changes", () => {
  // GCRA with a burst of 99: 100 at once, like the others' capacity (its default burst is 0).
  for (const algorithm of ["fixed-window", "sliding-window", "token-bucket", "gcra"] as const) {
    const spec = { algorithm, limit: 100, window: "1h", ...(algorithm === "gcra" ? { burst: 99 } : {}) };
    it(`${algorithm}: N falling from 4 to 3 does not give the keys a fresh share`, async () => {
      const { n, admitAll } = setup(spec);
      expect(await admitAll("k")).toBe(25);
      n.value = 3;
      // The key's 25 wait in the ledger to be charged to Redis: it stays at the share they were
      // counted at (stricter than 33 for the rest of the outage, never looser).
      expect(await admitAll("k")).toBe(0);
      // A key with no local admissions is limited at the same share meanwhile.
      expect(await admitAll("other")).toBe(25);
    });

    it(`${algorithm}: N rising from 2 to 4 does not give the keys a fresh share`, async () => {
      const { n, admitAll } = setup(spec);
      n.value = 2;
      expect(await admitAll("k")).toBe(50);
      n.value = 4;
      expect(await admitAll("k")).toBe(0);
    });
  }

  it("takes the new N once every local admission has been charged to Redis", async () => {
    const { n, d, admitAll } = setup({ algorithm: "fixed-window", limit: 100, window: "1h" });
    expect(await admitAll("k")).toBe(25);
    n.value = 3;
    // The store drains the ledger to charge Redis; a charge that fails puts the units back.
    const [[key, units, at]] = d.drain(() => true) as [[string, number, number]];
    expect(await admitAll("k")).toBe(0); // the charge is out: its units still count at 25
    d.restore(key, units, at);
    expect(await admitAll("k")).toBe(0);
    // The next charge is taken: Redis holds the key again.
    for (const [k] of d.drain(() => true)) {
      expect(await admitAll("k")).toBe(0);
      await d.charged(k);
    }
    expect(d.pending).toBe(false);
    // Redis holds the key's 25 again; the next outage starts every key at the new share.
    expect(await admitAll("k")).toBe(33);
  });
});
