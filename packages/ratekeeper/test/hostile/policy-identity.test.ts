/**
 * Two different policies must never share state. A policy's identity names a MemoryStore's table
 * and, as the default namespace, the limiter's Redis keys; when it was a 32-bit hash, policies
 * whose hashes collided (a pair is found by search in a second) shared one table, and the wrong
 * limit was enforced. This pair of ordinary sliding windows, 373 per 5 s and 818 per 15 min, is
 * such a collision of the 32-bit FNV-1a hash of the policy's fields.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, policyId, RateLimiter, resolveLimits, type LimitSpec } from "../../src/index.js";

const A: LimitSpec = { algorithm: "sliding-window", limit: 373, window: 5_000 };
const B: LimitSpec = { algorithm: "sliding-window", limit: 818, window: 900_000 };

/** 32-bit FNV-1a of a string: the hash the pair above collides under. */
function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

describe("policy identity: different policies never share state", () => {
  it("the pair is a real 32-bit collision of their defining fields", () => {
    const text = (s: LimitSpec) =>
      resolveLimits([s])
        .map((l) => [l.algorithmId, l.limit, l.windowMs, l.capacity, l.buckets, +l.weighted, +l.alignFirst].join(","))
        .join(";");
    expect(fnv1a32(text(A))).toBe(fnv1a32(text(B)));
  });

  it("policyId tells them apart", () => {
    expect(policyId(resolveLimits([A]))).not.toBe(policyId(resolveLimits([B])));
  });

  it("on one MemoryStore, each limiter enforces its own limit on the same key", async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const now = 1_700_000_000_000;
    const a = new RateLimiter({ ...A, store, clock: () => now });
    const b = new RateLimiter({ ...B, store, clock: () => now });
    for (let i = 0; i < 373; i++) expect((await a.consume("user:1")).allowed).toBe(true);
    expect((await a.consume("user:1")).allowed).toBe(false);
    const d = await b.consume("user:1");
    expect(d).toMatchObject({ allowed: true, limit: 818, remaining: 817 });
  });

  it("is injective over the fields that define a policy's state, and short", () => {
    const seen = new Map<string, string>();
    const algorithms = ["fixed-window", "sliding-log", "sliding-window", "token-bucket", "leaky-bucket", "gcra"] as const;
    for (const algorithm of algorithms) {
      for (const limit of [1, 2, 10, 35, 36, 100, 1000, 1296]) {
        for (const window of [360, 7_200, 3_600_000]) {
          const extras: Record<string, unknown>[] =
            algorithm === "sliding-window"
              ? [{}, { buckets: 10 }, { weighted: false }, { buckets: 36, weighted: false }]
              : algorithm === "fixed-window"
                ? [{}, { align: "first-request" }]
                : algorithm === "token-bucket" || algorithm === "leaky-bucket"
                  ? [{}, { capacity: limit + 1 }, { capacity: 36 }]
                  : algorithm === "gcra"
                    ? [{}, { burst: 1 }, { burst: 35 }]
                    : [{}];
          for (const extra of extras) {
            const specs = [{ algorithm, limit, window, ...extra }] as LimitSpec[];
            const ids = [policyId(resolveLimits(specs)), policyId(resolveLimits([...specs, { algorithm: "gcra", limit: 1, window: 1 }]))];
            for (const id of ids) {
              expect(id).toMatch(/^[0-9a-zA-Z._-]+$/);
              const spec = JSON.stringify(resolveLimits(specs).map(({ name: _n, shape: _s, burst: _b, ...rest }) => rest));
              const prev = seen.get(id);
              if (prev !== undefined && prev !== `${spec}${ids.indexOf(id)}`) throw new Error(`${id}: ${prev} and ${spec}`);
              seen.set(id, `${spec}${ids.indexOf(id)}`);
            }
          }
        }
      }
    }
    expect(policyId(resolveLimits([{ algorithm: "fixed-window", limit: 100, window: "1m" }])).length).toBeLessThanOrEqual(12);
  });
});
