/**
 * Key parts that are missing: a function part that answers nothing (undefined or "") stands as
 * "-", the same text as a function part that answers "-", so both land in one bucket. Only a
 * function part does that; a header part without its header falls back to the client address
 * (`ip=<client>`), and a header whose value is "-" is `<name>=-`, a bucket of its own.
 * docs/middleware.md ("Keys") says why this gives a client nothing.
 */
import { describe, expect, it } from "vitest";
import { HttpRateLimiter, type RequestAccess } from "../src/http/core.js";
import type { KeyPart } from "../src/http/keys.js";
import type { LimitSpec } from "../src/core/options.js";
import { RateLimitConfigError } from "../src/core/errors.js";

interface FakeReq {
  peer: string;
  headers: Record<string, string>;
  user?: string;
}
const access: RequestAccess<FakeReq> = {
  method: () => "GET",
  path: () => "/",
  route: () => undefined,
  remoteAddress: (r) => r.peer,
  header: (r, n) => r.headers[n],
};
const LIMITS: LimitSpec[] = [{ algorithm: "fixed-window", limit: 10, window: "1m" }];

async function keyOf(key: KeyPart<FakeReq> | KeyPart<FakeReq>[], r: Partial<FakeReq>): Promise<string | undefined> {
  const rl = new HttpRateLimiter<FakeReq>({ limits: LIMITS, key }, access);
  return (await rl.check({ peer: "192.0.2.1", headers: {}, ...r })).key;
}

describe("middleware keys: missing parts", () => {
  it('a function part answering undefined, "" or "-" gives one key', async () => {
    const user = (r: FakeReq) => r.user;
    const keys = await Promise.all([undefined, "", "-"].map((u) => keyOf(["ip", user], { user: u })));
    expect(keys).toEqual(["192.0.2.1|-", "192.0.2.1|-", "192.0.2.1|-"]);
    expect(await keyOf(["ip", user], { user: "42" })).toBe("192.0.2.1|42");
  });

  it('a header part: absent or empty is the address, "-" is a value of its own', async () => {
    const part = { header: "x-api-key" };
    expect(await keyOf(part, {})).toBe("ip=192.0.2.1");
    expect(await keyOf(part, { headers: { "x-api-key": "" } })).toBe("ip=192.0.2.1");
    expect(await keyOf(part, { headers: { "x-api-key": "-" } })).toBe("x-api-key=-");
  });
});

describe("middleware keys: a header part named ip", () => {
  it("is refused: its value would be keyed ip=<value>, the fallback key of a client at that address", () => {
    for (const header of ["ip", "IP"]) {
      let issues: string[] = [];
      try {
        new HttpRateLimiter<FakeReq>({ limits: LIMITS, key: ["route", { header }] }, access);
      } catch (e) {
        if (!(e instanceof RateLimitConfigError)) throw e;
        issues = e.issues.map((i) => `${i.path}: ${i.message}`);
      }
      expect(issues.join("\n")).toMatch(/^key\[1\]\.header: .*ip=/m);
    }
  });
});

describe("middleware keys: a header part whose name no request can carry", () => {
  it("is refused (' ip', 'ip ', 'x user', 'x-user:'): Node never finds it (the part silently keys on the address), a WHATWG Headers lookup (Hono) throws on every request", () => {
    for (const header of [" ip", "IP ", "x user", "x-user:", "x-\u00e9"]) {
      let issues: string[] = [];
      try {
        new HttpRateLimiter<FakeReq>({ limits: LIMITS, key: ["route", { header }] }, access);
      } catch (e) {
        if (!(e instanceof RateLimitConfigError)) throw e;
        issues = e.issues.map((i) => `${i.path}: ${i.message}`);
      }
      expect(issues.join("\n"), JSON.stringify(header)).toMatch(/^key\[1\]\.header: /m);
    }
    expect(() => new Headers().get("x user")).toThrow(TypeError);
  });
});
