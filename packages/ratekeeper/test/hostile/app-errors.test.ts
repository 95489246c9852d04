/**
 * The app's own code failing on a request (a `key`, `cost` or `skip` function that throws, a cost
 * function's answer the limiter cannot take) is no store outage: the request must never be let
 * through unlimited. A cost or a key often comes from the client (a batch size, a token the key
 * function decodes): before, any such failure was taken for a store failure and passed under the
 * default `failure: "open"` (silently without `onError`), so a client sending `X-Items: abc`, `0`,
 * `-5` or `1000`, or a malformed token, was never limited. Now: 500, reported to `onError`; a
 * cost above what the policy ever admits, 429 without `Retry-After` (waiting will not help). On
 * every adapter through real HTTP.
 */
import { describe, expect, it } from "vitest";
import { FRAMEWORKS } from "../http-gone-support.js";
import { httpRequest } from "../http-support.js";

const policy = { limits: [{ algorithm: "fixed-window", limit: 10, window: "1h", name: "ten" }], clock: () => 1_700_000_040_000 };

describe.each(Object.keys(FRAMEWORKS))("%s: the app's own code failing on a request", (name) => {
  const start = FRAMEWORKS[name] as (typeof FRAMEWORKS)[string];

  it("a cost function answering what the limiter cannot take: 500, reported, never let through", async () => {
    const errors: unknown[] = [];
    const header = (req: unknown): string | undefined => {
      const r = req as { headers?: Record<string, string>; req?: { header(n: string): string | undefined } };
      return r.req !== undefined && typeof r.req.header === "function" ? r.req.header("x-items") : r.headers?.["x-items"];
    };
    const app = await start({ ...policy, cost: (req: unknown) => Number(header(req)), onError: (e: unknown) => errors.push(e) });
    try {
      for (const items of ["abc", "0", "-5", "1.5"]) {
        const r = await httpRequest(app.url, { headers: { "x-items": items } });
        expect([items, r.status]).toEqual([items, 500]);
        expect(r.headers["content-type"]).toMatch(/^application\/problem\+json/);
      }
      expect(errors.length).toBe(4);
      expect(errors.every((e) => e instanceof RangeError)).toBe(true);
      const big = await httpRequest(app.url, { headers: { "x-items": "1000" } });
      expect(big.status).toBe(429);
      expect(big.headers["retry-after"]).toBeUndefined();
      expect(JSON.parse(big.body)).toMatchObject({ status: 429, "violated-policies": ["ten"] });
      expect((await httpRequest(app.url, { headers: { "x-items": "2" } })).status).toBe(200);
      expect(app.served()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it("a key or skip function that throws: 500, reported, never let through", async () => {
    for (const thrower of ["key", "skip"]) {
      const errors: unknown[] = [];
      const boom = (): never => {
        throw new Error(`${thrower} boom`);
      };
      const app = await start({ ...policy, [thrower]: boom, onError: (e: unknown) => errors.push(e) });
      try {
        expect((await httpRequest(app.url)).status).toBe(500);
        expect(String(errors[0])).toContain(`${thrower} boom`);
        expect(app.served()).toBe(0);
      } finally {
        await app.close();
      }
    }
  });
});
