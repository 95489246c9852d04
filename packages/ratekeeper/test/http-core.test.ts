import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RateLimiter } from "../src/limiter.js";
import { MemoryStore } from "../src/stores/memory.js";
import type { Store } from "../src/store.js";
import { RateLimitConfigError } from "../src/core/errors.js";
import type { LimitSpec } from "../src/core/options.js";
import { HttpRateLimiter, type RequestAccess } from "../src/http/core.js";
import { HeaderWriter, type HeaderStyle } from "../src/http/headers.js";

/** A plain request object, so the core is tested without any framework. */
interface FakeReq {
  method: string;
  path: string;
  peer: string | undefined;
  headers: Record<string, string>;
}
const access: RequestAccess<FakeReq> = {
  method: (r) => r.method,
  path: (r) => r.path,
  route: () => undefined,
  remoteAddress: (r) => r.peer,
  header: (r, n) => r.headers[n],
};
const req = (over: Partial<FakeReq> = {}): FakeReq => ({ method: "GET", path: "/", peer: "192.0.2.1", headers: {}, ...over });

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof RateLimitConfigError) return e.issues.map((i) => i.path);
    throw e;
  }
  return [];
}

describe("HttpRateLimiter options", () => {
  it("names every bad option", () => {
    const paths = issuesOf(
      () =>
        new HttpRateLimiter(
          {
            limits: [{ algorithm: "fixed-window", limit: 0, window: "1m" }],
            key: ["ip", "nope" as "ip"],
            cost: { "GET /user": 0 },
            headers: ["ietf", "draft-7"],
            maxDelayMs: -1,
            failure: "maybe" as "open",
            trustedProxies: ["bogus"],
            countOnly: "some" as "failed",
            typo: true,
          } as never,
          access,
        ),
    );
    expect(paths).toEqual(
      expect.arrayContaining([
        "typo",
        "limits[0].limit",
        "trustedProxies[0]",
        "key[1]",
        'cost["GET /user"]',
        "headers",
        "maxDelayMs",
        "failure",
        "countOnly",
      ]),
    );
  });

  it("the old store-failure options name what replaced them", () => {
    const limits = [{ algorithm: "fixed-window" as const, limit: 1, window: "1m" }];
    expect(() => new HttpRateLimiter({ limits, onStoreError: "deny" } as never, access)).toThrow(
      /onStoreError: renamed: use failure: "open"/,
    );
    expect(() => new HttpRateLimiter({ limits, storeTimeoutMs: 50 } as never, access)).toThrow(/storeTimeoutMs: moved to the store/);
  });

  it("needs a policy, and not two", () => {
    expect(issuesOf(() => new HttpRateLimiter({}, access))).toEqual(["limiter"]);
    const limiter = new RateLimiter({ algorithm: "gcra", limit: 1, window: "1s" });
    expect(issuesOf(() => new HttpRateLimiter({ limiter, limits: [] }, access))).toContain("limits");
    expect(issuesOf(() => new HttpRateLimiter({ limiter, store: new MemoryStore() }, access))).toEqual(["store"]);
  });

  it("accepts a limiter, limiter options, or limits", () => {
    const spec: LimitSpec = { algorithm: "gcra", limit: 1, window: "1s" };
    for (const o of [{ limiter: new RateLimiter(spec) }, { limiter: spec }, { limits: [spec] }]) {
      expect(new HttpRateLimiter(o, access).limiter?.limits[0]?.algorithm).toBe("gcra");
    }
  });
});

describe("HttpRateLimiter.check", () => {
  const clockAt = (t: { now: number }) => () => t.now;

  it("cost table: METHOD route, then route alone, else 1", async () => {
    const t = { now: 0 };
    const rl = new HttpRateLimiter(
      { limits: [{ algorithm: "fixed-window", limit: 10, window: "1m" }], clock: clockAt(t), cost: { "post /user": 3, "/upload": 5 } },
      access,
    );
    const costs = [];
    for (const r of [req({ method: "POST", path: "/user" }), req({ method: "PUT", path: "/upload" }), req({ path: "/other" })])
      costs.push((await rl.check(r)).cost);
    expect(costs).toEqual([3, 5, 1]);
  });

  it("a request with no peer address is refused (403) when the key uses the address, never keyed 'unknown'", async () => {
    const rl = new HttpRateLimiter({ limits: [{ algorithm: "fixed-window", limit: 10, window: "1m" }] }, access);
    const r = await rl.check(req({ peer: undefined }));
    expect(r.pass).toBe(false);
    expect(r.status).toBe(403);
    // A key that does not use the address is told "unknown" and decides as usual.
    const byUser = new HttpRateLimiter({ limits: [{ algorithm: "fixed-window", limit: 10, window: "1m" }], key: () => "user:7" }, access);
    expect((await byUser.check(req({ peer: undefined }))).key).toBe("user:7");
  });

  it("errors thrown by user callbacks go to onError and the request is answered 500, never let through", async () => {
    const errors: unknown[] = [];
    const rl = new HttpRateLimiter(
      {
        limits: [{ algorithm: "fixed-window", limit: 10, window: "1m" }],
        key: () => {
          throw new Error("boom");
        },
        onError: (e) => errors.push(e),
      },
      access,
    );
    const r = await rl.check(req());
    expect([r.pass, r.status]).toEqual([false, 500]);
    expect(String(errors[0])).toMatch(/boom/);
  });

  it("a fixed cost or table entry above what the policy can ever admit is a config error; a cost function's, a 429 reported through onError", async () => {
    const limits = [{ algorithm: "fixed-window" as const, limit: 2, window: "1m" as const }];
    expect(() => new HttpRateLimiter({ limits, cost: 3 }, access)).toThrow(
      /cost: 3 is more than the policy could ever admit \(at most 2\)/,
    );
    expect(() => new HttpRateLimiter({ limits, cost: { "POST /x": 5 } }, access)).toThrow(/cost\["POST \/x"\]: 5 is more/);
    const errors: unknown[] = [];
    const rl = new HttpRateLimiter({ limits, cost: () => 3, onError: (e) => errors.push(e) }, access);
    const r = await rl.check(req());
    expect([r.pass, r.status, r.headers]).toEqual([false, 429, []]);
    expect(errors[0]).toBeInstanceOf(RangeError);
  });

  it("Retry-After equals the denying policy's t in every header style, for any traffic (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ dt: fc.integer({ min: 0, max: 3_000 }), cost: fc.integer({ min: 1, max: 2 }) }), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.constantFrom<HeaderStyle>("ietf", "draft-7", "draft-6"),
        async (ops, style) => {
          const t = { now: 1_000_000 };
          const rl = new HttpRateLimiter(
            {
              limits: [
                { algorithm: "sliding-window", limit: 5, window: "10s", name: "slow" },
                { algorithm: "token-bucket", limit: 2, window: "1s", name: "fast" },
              ],
              clock: clockAt(t),
              headers: style,
              cost: (r: FakeReq) => Number(r.headers["x-cost"]),
            },
            access,
          );
          for (const op of ops) {
            t.now += op.dt;
            const r = await rl.check(req({ headers: { "x-cost": String(op.cost) } }));
            if (r.pass) continue;
            const h = Object.fromEntries(r.headers);
            const retry = Number(h["Retry-After"]);
            expect(retry).toBeGreaterThanOrEqual(1);
            const d = r.decision!;
            if (style === "ietf") {
              const denyName = d.policyName;
              const m = new RegExp(`"${denyName}";r=\\d+;t=(\\d+)`).exec(h["RateLimit"] as string);
              expect(Number(m?.[1])).toBe(retry);
            } else if (style === "draft-7") expect(h["RateLimit"]).toMatch(new RegExp(`reset=${retry}$`));
            else expect(h["RateLimit-Reset"]).toBe(String(retry));
            // Truthful: after Retry-After seconds the same request is admitted.
            const probe = await rl.limiter!.peek("192.0.2.1", op.cost);
            expect(probe.allowed).toBe(false);
            t.now += retry * 1000;
            expect((await rl.limiter!.peek("192.0.2.1", op.cost)).allowed).toBe(true);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("headers after a multi-limit denial", () => {
  it("each limit reports what it has now: a denial charged nothing (cost 2)", async () => {
    const t = { now: 1_700_000_040_000 };
    const rl = new HttpRateLimiter(
      {
        limits: [
          { algorithm: "fixed-window", limit: 100, window: "1m", name: "minute" },
          { algorithm: "fixed-window", limit: 3, window: "1s", name: "second" },
        ],
        clock: () => t.now,
        cost: 2,
      },
      access,
    );
    const ok = await rl.check(req());
    expect(Object.fromEntries(ok.headers)["RateLimit"]).toBe('"minute";r=98;t=60, "second";r=1;t=1');
    const denied = await rl.check(req());
    expect(denied.status).toBe(429);
    expect(Object.fromEntries(denied.headers)["RateLimit"]).toBe('"minute";r=98;t=60, "second";r=1;t=1');
    expect(denied.problem?.["violated-policies"]).toEqual(["second"]);
  });
});

describe("X-RateLimit-Reset (an epoch time) with a limiter's injected clock", () => {
  it("is on that clock whether the limiter is given built or as its options", async () => {
    // The header adds the decision's resetAfterMs (a duration on the limiter's clock) to a
    // reading of the middleware's clock. A RateLimiter given built kept its clock to itself, so
    // the middleware read Date.now(): on a test's or a replay's clock the header was off by the gap.
    const t = { now: 1_700_000_040_000 }; // a minute's start
    const spec = { algorithm: "fixed-window", limit: 10, window: "1m", clock: () => t.now } as const;
    for (const limiter of [new RateLimiter(spec), spec]) {
      const rl = new HttpRateLimiter({ limiter, headers: "x-ratelimit" }, access);
      expect(Object.fromEntries((await rl.check(req())).headers)["X-RateLimit-Reset"]).toBe("1700000100");
    }
  });
});

describe("HeaderWriter", () => {
  it("renders RateLimit-Policy once per limit with q and w (seconds, rounded up)", () => {
    const limiter = new RateLimiter({
      limits: [
        { algorithm: "gcra", limit: 2, window: 1500, name: "a" },
        { algorithm: "fixed-window", limit: 100, window: "1h" },
      ],
    });
    const out: [string, string][] = [];
    new HeaderWriter(limiter.limits, ["ietf"]).write(
      {
        allowed: true,
        limit: 2,
        remaining: 1,
        retryAfterMs: 0,
        resetAfterMs: 750,
        delayMs: 0,
        reason: undefined,
        policy: 0,
        policyName: "a",
        windowMs: 1500,
        limits: [
          { name: "a", allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 750, windowMs: 1500 },
          { name: "100-per-1h", allowed: true, limit: 100, remaining: 99, retryAfterMs: 0, resetAfterMs: 3_600_000, windowMs: 3_600_000 },
        ],
      },
      0,
      out,
    );
    expect(out).toEqual([
      ["RateLimit-Policy", '"a";q=2;w=2, "100-per-1h";q=100;w=3600'],
      ["RateLimit", '"a";r=1;t=1, "100-per-1h";r=99;t=3600'],
    ]);
  });
});

describe("429 bodies", () => {
  it("the body is the problem as JSON, for every retry time (bodies are kept and reused)", async () => {
    let now = 1_700_000_000_000;
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 1, window: "1h", store: new MemoryStore(), clock: () => now });
    const rl = new HttpRateLimiter({ limiter }, access);
    now -= now % 3_600_000;
    await rl.check(req());
    for (let i = 0; i < 200; i++) {
      now += 250;
      const r = await rl.check(req());
      expect(r.pass).toBe(false);
      expect(JSON.parse(r.body as string)).toEqual(r.problem);
      expect(r.problem?.["retry-after"]).toBe(Math.ceil((r.decision?.retryAfterMs as number) / 1000));
    }
  });
});

describe("shaping beyond maxDelayMs", () => {
  /** A MemoryStore whose bound stores count their calls. */
  function countingStore(): { store: Store; calls: string[] } {
    const inner = new MemoryStore();
    const calls: string[] = [];
    const store: Store = {
      bind(limits, namespace) {
        const b = inner.bind(limits, namespace);
        return {
          consume: (key, cost, nowMs, maxDelayMs) => (calls.push(`consume ${maxDelayMs}`), b.consume(key, cost, nowMs, maxDelayMs)),
          peek: (key, cost, nowMs) => (calls.push("peek"), b.peek(key, cost, nowMs)),
          refund: (key, cost, nowMs) => (calls.push("refund"), b.refund(key, cost, nowMs)),
          reset: (key) => (calls.push("reset"), b.reset(key)),
        };
      },
    };
    return { store, calls };
  }

  it("a wait longer than maxDelayMs is refused in the store's one step: no refund, the queue unchanged", async () => {
    const { store, calls } = countingStore();
    const now = 1_700_000_000_000;
    const limits: LimitSpec[] = [{ algorithm: "leaky-bucket", mode: "shape", limit: 10, window: "1s", capacity: 10 }];
    const rl = new HttpRateLimiter({ limits, store, clock: () => now, maxDelayMs: 150 }, access);
    expect((await rl.check(req())).delayMs).toBe(0);
    expect((await rl.check(req())).delayMs).toBe(100);
    const over = await rl.check(req());
    expect(over.pass).toBe(false);
    expect(over.decision).toMatchObject({ allowed: false, reason: "limit", retryAfterMs: 50, remaining: 8 });
    expect(over.problem?.["violated-policies"]).toEqual(["10-per-1s"]);
    expect(calls).toEqual(["consume 150", "consume 150", "consume 150"]);
    expect((await (rl.limiter as RateLimiter).peek(req().peer as string)).delayMs).toBe(200);
  });

  it("shadow mode holds no request, so it passes no bound and charges every request", async () => {
    const { store, calls } = countingStore();
    const now = 1_700_000_000_000;
    const limits: LimitSpec[] = [{ algorithm: "leaky-bucket", mode: "shape", limit: 10, window: "1s", capacity: 10 }];
    const rl = new HttpRateLimiter({ limits, store, clock: () => now, maxDelayMs: 0, shadow: true }, access);
    for (let i = 0; i < 3; i++) expect(await rl.check(req())).toMatchObject({ pass: true, delayMs: 0 });
    expect(calls).toEqual(["consume undefined", "consume undefined", "consume undefined"]);
  });
});

describe("429 bodies, kept", () => {
  it("each denial's body is exactly its own problem's JSON, though bodies and details are kept; every result has its own problem", async () => {
    const start = 1_700_000_040_000; // a whole number of 2-minute windows since the epoch
    const t = { now: start };
    const rl = new HttpRateLimiter(
      { limits: [{ algorithm: "fixed-window", limit: 1, window: "2m", name: "m" }], clock: () => t.now },
      access,
    );
    expect((await rl.check(req())).pass).toBe(true);
    const seen = new Set<unknown>();
    // 70 different retry seconds, twice over: past the 64 kept, and each answered from the cache the second time.
    for (let round = 0; round < 2; round++) {
      for (let s = 0; s < 70; s++) {
        t.now = start + s * 1000 + 400;
        const r = await rl.check(req());
        expect(r.status).toBe(429);
        expect(r.body).toBe(JSON.stringify(r.problem));
        expect(r.problem?.["retry-after"]).toBe(120 - s);
        expect(r.problem?.detail).toBe(`Rate limit exceeded (m); retry after ${120 - s} s.`);
        expect(seen.has(r.problem)).toBe(false);
        seen.add(r.problem);
      }
    }
  });
});
