/**
 * The behaviour table's cases about deciding: limits, costs, header styles, skip, allow and deny
 * lists, client addresses behind proxies, IPv6 grouping and keys.
 */
import { expect } from "vitest";
import { common, fixed, problem, T0, type Case } from "./http-support.js";

export const DECISION_CASES: Case[] = [
  {
    name: "admits up to the limit, then 429 with Retry-After, problem+json and IETF headers; the window passes",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(3, "1m")] }),
    async run(t, ctx) {
      for (const r of [2, 1, 0]) {
        const res = await t.request();
        expect(res.status).toBe(200);
        expect(res.body).toBe("hello");
        expect(res.headers["ratelimit-policy"]).toBe('"3-per-1m";q=3;w=60');
        expect(res.headers["ratelimit"]).toBe(`"3-per-1m";r=${r};t=60`);
        expect(res.headers["retry-after"]).toBeUndefined();
      }
      ctx.clock.now += 20_000;
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("40");
      expect(denied.headers["ratelimit"]).toBe('"3-per-1m";r=0;t=40');
      const body = problem(denied);
      expect(body).toMatchObject({
        type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
        status: 429,
        "retry-after": 40,
        "violated-policies": ["3-per-1m"],
      });
      ctx.clock.now += 40_000;
      expect((await t.request()).status).toBe(200);
    },
  },
  {
    name: "several rules on one key (100 per minute AND 2 per second): all-or-nothing, one named policy each",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(100, "1m", "minute"), fixed(2, "1s", "second")] }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      const second = await t.request();
      expect(second.headers["ratelimit-policy"]).toBe('"minute";q=100;w=60, "second";q=2;w=1');
      expect(second.headers["ratelimit"]).toBe('"minute";r=98;t=60, "second";r=0;t=1');
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("1");
      // The denial charged nothing: the minute rule still has 98.
      expect(denied.headers["ratelimit"]).toBe('"minute";r=98;t=60, "second";r=0;t=1');
      expect(problem(denied)["violated-policies"]).toEqual(["second"]);
      expect(ctx.events[2]?.decision.limits?.map((l) => l.allowed)).toEqual([true, false]);
      ctx.clock.now += 1_000;
      const again = await t.request();
      expect(again.status).toBe(200);
      expect(again.headers["ratelimit"]).toBe('"minute";r=97;t=59, "second";r=1;t=1');
    },
  },
  {
    name: "costs from one bucket: GET /user costs 1, POST /user costs 2",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(5, "1m", "user")], cost: { "GET /user": 1, "POST /user": 2 } }),
    async run(t, ctx) {
      const p1 = await t.request({ method: "POST", path: "/user" });
      expect(p1.status).toBe(201);
      expect(p1.headers["ratelimit"]).toBe('"user";r=3;t=60');
      expect((await t.request({ method: "POST", path: "/user" })).headers["ratelimit"]).toBe('"user";r=1;t=60');
      // One unit left: a POST (2) is refused, a GET (1) still fits.
      const p3 = await t.request({ method: "POST", path: "/user" });
      expect(p3.status).toBe(429);
      expect(p3.headers["ratelimit"]).toBe('"user";r=1;t=60');
      expect((await t.request({ path: "/user" })).status).toBe(200);
      expect((await t.request({ path: "/user" })).status).toBe(429);
      expect(ctx.events.map((e) => e.cost)).toEqual([2, 2, 2, 1, 1]);
    },
  },
  {
    name: "header style draft-7: RateLimit: limit, remaining, reset",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], headers: "draft-7" }),
    async run(t) {
      const ok = await t.request();
      expect(ok.headers["ratelimit"]).toBe("limit=1, remaining=0, reset=60");
      expect(ok.headers["ratelimit-policy"]).toBe("1;w=60");
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["ratelimit"]).toBe("limit=1, remaining=0, reset=60");
      expect(denied.headers["retry-after"]).toBe("60");
    },
  },
  {
    name: "header style draft-6: RateLimit-Limit / -Remaining / -Reset",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(2, "1m")], headers: "draft-6" }),
    async run(t) {
      const ok = await t.request();
      expect([ok.headers["ratelimit-limit"], ok.headers["ratelimit-remaining"], ok.headers["ratelimit-reset"]]).toEqual(["2", "1", "60"]);
      expect(ok.headers["ratelimit"]).toBeUndefined();
    },
  },
  {
    name: "header style x-ratelimit: X-RateLimit-Limit / -Remaining / -Reset (epoch seconds)",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(2, "1m")], headers: "x-ratelimit" }),
    async run(t) {
      const ok = await t.request();
      expect([ok.headers["x-ratelimit-limit"], ok.headers["x-ratelimit-remaining"], ok.headers["x-ratelimit-reset"]]).toEqual([
        "2",
        "1",
        String(T0 / 1000 + 60),
      ]);
      expect(ok.headers["ratelimit-policy"]).toBeUndefined();
    },
  },
  {
    name: "headers: false sends no limit headers, but a 429 still carries Retry-After",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], headers: false }),
    async run(t) {
      const ok = await t.request();
      expect(Object.keys(ok.headers).filter((h) => h.includes("ratelimit"))).toEqual([]);
      const denied = await t.request();
      expect(denied.status).toBe(429);
      expect(denied.headers["retry-after"]).toBe("60");
    },
  },
  {
    name: "shadow mode decides, sets headers and reports, but never blocks",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], shadow: true }),
    async run(t, ctx) {
      for (let i = 0; i < 3; i++) {
        const r = await t.request();
        expect(r.status).toBe(200);
        expect(r.headers["ratelimit"]).toBe('"1-per-1m";r=0;t=60');
      }
      expect(ctx.events.map((e) => [e.limited, e.shadow])).toEqual([
        [false, true],
        [true, true],
        [true, true],
      ]);
    },
  },
  {
    name: "skip: skipped requests are neither counted nor given headers",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], skip: (req: unknown) => ctx.driver.pathOf(req) === "/status/202" }),
    async run(t) {
      for (let i = 0; i < 3; i++) {
        const r = await t.request({ path: "/status/202" });
        expect(r.status).toBe(202);
        expect(r.headers["ratelimit"]).toBeUndefined();
      }
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
    },
  },
  {
    name: "allow list: listed clients are never limited",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], allowList: ["127.0.0.0/8"] }),
    async run(t, ctx) {
      for (let i = 0; i < 3; i++) expect((await t.request()).status).toBe(200);
      expect(ctx.events).toEqual([]);
    },
  },
  {
    name: "deny list: listed clients get 403 problem+json",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(100, "1m")], denyList: ["127.0.0.1", "10.0.0.0/8"] }),
    async run(t) {
      const r = await t.request();
      expect(r.status).toBe(403);
      expect(problem(r)).toMatchObject({ status: 403, title: "Forbidden" });
    },
  },
  {
    name: "untrusted peer: a spoofed X-Forwarded-For or Forwarded changes nothing",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "1.1.1.1" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "2.2.2.2" } })).status).toBe(429);
      expect((await t.request({ headers: { forwarded: "for=3.3.3.3" } })).status).toBe(429);
      expect(new Set(ctx.events.map((e) => e.key))).toEqual(new Set(["127.0.0.1"]));
    },
  },
  {
    name: "trusted proxies: X-Forwarded-For read from the right; spoofed entries left of the client change nothing; ::ffff: mapped",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], trustedProxies: ["loopback", "10.0.0.0/8"] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.9, 10.1.2.3" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "7.7.7.7, 203.0.113.9, 10.9.9.9" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "::ffff:203.0.113.9" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "203.0.113.10" } })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual(["203.0.113.9", "203.0.113.9", "203.0.113.9", "203.0.113.10"]);
    },
  },
  {
    name: "trusted proxies with RFC 7239 Forwarded (and X-Forwarded-For then ignored)",
    options: (ctx) => ({
      ...common(ctx),
      limits: [fixed(5, "1m")],
      trustedProxies: ["loopback"],
      forwardedHeader: "forwarded",
      ipv6Subnet: 128,
    }),
    async run(t, ctx) {
      await t.request({
        headers: { forwarded: 'for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"', "x-forwarded-for": "9.9.9.9" },
      });
      await t.request({ headers: { "x-forwarded-for": "9.9.9.9" } });
      expect(ctx.events.map((e) => e.key)).toEqual(["2001:db8:cafe::17", "127.0.0.1"]);
    },
  },
  {
    name: "IPv6 clients are grouped by /64: rotating addresses inside the prefix shares one bucket",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], trustedProxies: ["loopback"] }),
    async run(t, ctx) {
      expect((await t.request({ headers: { "x-forwarded-for": "2001:db8:1:2::1" } })).status).toBe(200);
      expect((await t.request({ headers: { "x-forwarded-for": "2001:DB8:1:2:aaaa:bbbb:cccc:dddd" } })).status).toBe(429);
      expect((await t.request({ headers: { "x-forwarded-for": "2001:db8:1:3::1" } })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual(["2001:db8:1:2::/64", "2001:db8:1:2::/64", "2001:db8:1:3::/64"]);
    },
  },
  {
    name: "an IPv6 peer on ::1 is keyed by its /64",
    needsSocket: true,
    listen: { host: "::1" },
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")] }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
      expect(ctx.events.map((e) => e.key)).toEqual(["::/64", "::/64"]);
    },
  },
  {
    name: "keys from an API key header, method and route combined",
    options: (ctx) => ({ ...common(ctx), limits: [fixed(1, "1m")], key: [{ header: "x-api-key" }, "method", "route"] }),
    async run(t, ctx) {
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k1" } })).status).toBe(200);
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k1" } })).status).toBe(429);
      expect((await t.request({ path: "/user", headers: { "x-api-key": "k2" } })).status).toBe(200);
      expect((await t.request({ path: "/user", method: "POST", headers: { "x-api-key": "k1" } })).status).toBe(201);
      // No API key: falls back to the client address rather than one shared anonymous bucket.
      expect((await t.request({ path: "/user" })).status).toBe(200);
      expect(ctx.events.map((e) => e.key)).toEqual([
        "x-api-key=k1|GET|/user",
        "x-api-key=k1|GET|/user",
        "x-api-key=k2|GET|/user",
        "x-api-key=k1|POST|/user",
        "ip=127.0.0.1|GET|/user",
      ]);
    },
  },
  {
    name: "a custom key function (a user id)",
    options: (ctx) => ({
      ...common(ctx),
      limits: [fixed(1, "1m")],
      key: async (_req: unknown, info: { ip: string }) => `user:${info.ip === "127.0.0.1" ? "alice" : "bob"}`,
    }),
    async run(t, ctx) {
      expect((await t.request()).status).toBe(200);
      expect((await t.request()).status).toBe(429);
      expect(ctx.events[0]?.key).toBe("user:alice");
    },
  },
];
