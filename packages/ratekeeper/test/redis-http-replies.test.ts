/**
 * HttpRedisStore against replies that are not the script's: an HTTP client hands over whatever
 * the endpoint answered (a proxy's error page decoded, a stale script's reply), and a reply of the
 * right length but wrong contents became NaN in decisions (remaining NaN, `RateLimit-Remaining:
 * NaN`). Such a reply is a store failure: the failure policy answers and `onError` is told.
 * No server needed: the client is a stand-in.
 */
import { describe, expect, it } from "vitest";
import { RateLimiter, RateLimitStoreError } from "../src/index.js";
import { HttpRedisStore } from "../src/stores/redis-http/index.js";

/** A client whose every script call answers `reply`. */
const answering = (reply: unknown) => ({ eval: async () => reply, evalsha: async () => reply });

const SPEC = { algorithm: "fixed-window", limit: 5, window: "1m" } as const;

describe("HttpRedisStore: replies that are not the script's", () => {
  const wrong: unknown[] = [
    ["a", "b", "c", "d", "e", "f"],
    [1, "x", 3, 4, 5],
    [1, 4, 0, 60_000, null],
    [1, 4.5, 0, 60_000, 0],
    [1, 4, 0, 60_000, { ok: 1 }],
    "<html>502 Bad Gateway</html>",
  ];
  for (const reply of wrong) {
    it(`${JSON.stringify(reply)}: a store failure, answered by the policy, never NaN`, async () => {
      const errors: unknown[] = [];
      const store = new HttpRedisStore({ client: answering(reply), failure: "throw", onError: (e) => errors.push(e) });
      const limiter = new RateLimiter({ ...SPEC, store });
      await expect(limiter.consume("k")).rejects.toBeInstanceOf(RateLimitStoreError);
      expect(errors).toHaveLength(1);
      // The default policy keeps limiting with its local store: every number a number.
      const fallback = new RateLimiter({ ...SPEC, store: new HttpRedisStore({ client: answering(reply) }) });
      const ds = [];
      for (let i = 0; i < 6; i++) ds.push(await fallback.consume("k"));
      expect(ds.map((d) => [d.allowed, d.reason])).toEqual([...Array.from({ length: 5 }, () => [true, "insurance"]), [false, "insurance"]]);
      for (const d of ds) expect(Number.isFinite(d.remaining) && Number.isFinite(d.resetAfterMs)).toBe(true);
    });
  }

  it("numbers as decimal text are the script's reply (HTTP clients may hand them over so)", async () => {
    const store = new HttpRedisStore({ client: answering(["1", "4", "0", "60000", "0"]), failure: "throw" });
    const d = await new RateLimiter({ ...SPEC, store }).consume("k");
    expect([d.allowed, d.remaining]).toEqual([true, 4]);
  });
});
