/**
 * Every bad input in the contract gets a RateLimitConfigError or a RangeError that names the field
 * and the value: bad input gets a clear error, never a silent pass.
 */
import { describe, expect, it } from "vitest";
import {
  collectIssues,
  MemoryStore,
  parseDuration,
  RateLimitConfigError,
  RateLimiter,
  resolveLimit,
  resolveLimits,
  type ConfigIssue,
} from "../src/index.js";

type Bad = [label: string, options: Record<string, unknown>, field: string, shown: string];

const cases: Bad[] = [
  // limit
  ["limit 0", { algorithm: "fixed-window", limit: 0, window: "1m" }, "limit", "0"],
  ["limit negative", { algorithm: "sliding-log", limit: -5, window: "1m" }, "limit", "-5"],
  ["limit fractional", { algorithm: "gcra", limit: 1.5, window: "1s" }, "limit", "1.5"],
  ["limit NaN", { algorithm: "token-bucket", limit: NaN, window: "1s" }, "limit", "NaN"],
  ["limit Infinity", { algorithm: "token-bucket", limit: Infinity, window: "1s" }, "limit", "Infinity"],
  ["limit a string", { algorithm: "fixed-window", limit: "100", window: "1m" }, "limit", '"100"'],
  ["limit missing", { algorithm: "fixed-window", window: "1m" }, "limit", "undefined"],
  // window
  ["window 0", { algorithm: "fixed-window", limit: 1, window: 0 }, "window", "0"],
  ["window negative", { algorithm: "fixed-window", limit: 1, window: -1000 }, "window", "-1000"],
  ["window fractional ms", { algorithm: "sliding-log", limit: 1, window: 2.5 }, "window", "2.5"],
  ['window "0s"', { algorithm: "fixed-window", limit: 1, window: "0s" }, "window", '"0s"'],
  ['window "1.5s"', { algorithm: "fixed-window", limit: 1, window: "1.5s" }, "window", '"1.5s"'],
  ['window "1 week"', { algorithm: "fixed-window", limit: 1, window: "1w" }, "window", '"1w"'],
  ['window "abc"', { algorithm: "fixed-window", limit: 1, window: "abc" }, "window", '"abc"'],
  ["window missing", { algorithm: "fixed-window", limit: 1 }, "window", "undefined"],
  ["window too long to be exact", { algorithm: "fixed-window", limit: 1, window: "999999999999d" }, "window", '"999999999999d"'],
  // algorithm
  ["unknown algorithm", { algorithm: "sliding-windows", limit: 1, window: "1m" }, "algorithm", '"sliding-windows"'],
  ["algorithm missing", { limit: 1, window: "1m" }, "algorithm", "undefined"],
  // unknown options, per algorithm
  ["burst on a token bucket", { algorithm: "token-bucket", limit: 1, window: "1s", burst: 5 }, "burst", "unknown option"],
  ["capacity on gcra", { algorithm: "gcra", limit: 1, window: "1s", capacity: 5 }, "capacity", "unknown option"],
  ["buckets on a fixed window", { algorithm: "fixed-window", limit: 1, window: "1m", buckets: 4 }, "buckets", "unknown option"],
  ["mode on a token bucket", { algorithm: "token-bucket", limit: 1, window: "1s", mode: "shape" }, "mode", "unknown option"],
  ["align on a sliding log", { algorithm: "sliding-log", limit: 1, window: "1s", align: "clock" }, "align", "unknown option"],
  ["a typo", { algorithm: "sliding-window", limit: 1, window: "1m", bucket: 4 }, "bucket", "unknown option"],
  // options' values
  ["align bad", { algorithm: "fixed-window", limit: 1, window: "1m", align: "first" }, "align", '"first"'],
  ["buckets 0", { algorithm: "sliding-window", limit: 1, window: "1m", buckets: 0 }, "buckets", "0"],
  ["buckets fractional", { algorithm: "sliding-window", limit: 1, window: "1m", buckets: 2.5 }, "buckets", "2.5"],
  ["buckets not dividing the window", { algorithm: "sliding-window", limit: 1, window: 1000, buckets: 7 }, "buckets", "7"],
  ["buckets too many", { algorithm: "sliding-window", limit: 1, window: "1h", buckets: 3600 }, "buckets", "3600"],
  ["weighted not a boolean", { algorithm: "sliding-window", limit: 1, window: "1m", weighted: "yes" }, "weighted", '"yes"'],
  ["capacity 0", { algorithm: "token-bucket", limit: 1, window: "1s", capacity: 0 }, "capacity", "0"],
  ["capacity fractional", { algorithm: "leaky-bucket", limit: 1, window: "1s", capacity: 2.5 }, "capacity", "2.5"],
  ["mode bad", { algorithm: "leaky-bucket", limit: 1, window: "1s", mode: "queue" }, "mode", '"queue"'],
  ["burst negative", { algorithm: "gcra", limit: 1, window: "1s", burst: -1 }, "burst", "-1"],
  ["burst fractional", { algorithm: "gcra", limit: 1, window: "1s", burst: 0.5 }, "burst", "0.5"],
  ["capacity x window past 2^53", { algorithm: "token-bucket", limit: 1, window: "1d", capacity: 2 ** 40 }, "capacity", "2^53"],
  ["sliding log too long to store", { algorithm: "sliding-log", limit: 2_000_000, window: "1h" }, "limit", "2000000"],
  ["name with spaces", { algorithm: "gcra", limit: 1, window: "1s", name: "my policy" }, "name", '"my policy"'],
  // the limiter's own options
  ["store not a store", { algorithm: "gcra", limit: 1, window: "1s", store: {} }, "store", "{}"],
  ["clock not a function", { algorithm: "gcra", limit: 1, window: "1s", clock: 5 }, "clock", "5"],
  ["namespace empty", { algorithm: "gcra", limit: 1, window: "1s", namespace: "" }, "namespace", '""'],
  ["limits empty", { limits: [] }, "limits", "[]"],
  ["limits not an array", { limits: { algorithm: "gcra", limit: 1, window: "1s" } }, "limits", "gcra"],
  ["an option beside limits", { limits: [{ algorithm: "gcra", limit: 1, window: "1s" }], limit: 5 }, "limit", "beside"],
  [
    "a bad entry in limits",
    {
      limits: [
        { algorithm: "gcra", limit: 1, window: "1s" },
        { algorithm: "gcra", limit: 0, window: "1s" },
      ],
    },
    "limits[1].limit",
    "0",
  ],
];

describe("RateLimiter options", () => {
  it.each(cases)("%s", (_label, options, field, shown) => {
    let error: unknown;
    try {
      new RateLimiter(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RateLimitConfigError);
    const e = error as RateLimitConfigError;
    expect(e.message).toContain(field);
    expect(e.message).toContain(shown);
    expect(e.issues.some((i) => i.path === field || i.path.endsWith(`.${field}`) || i.path === field.split(".")[0])).toBe(true);
    expect(e.code).toBe("ERR_RATEKEEPER_CONFIG");
  });

  it("lists every problem at once, each with its path", () => {
    try {
      new RateLimiter({ limits: [{ algorithm: "gcra", limit: 0, window: "1x" } as never, { algorithm: "nope" } as never] });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RateLimitConfigError);
      expect((e as RateLimitConfigError).issues.map((i) => i.path)).toEqual([
        "limits[0].limit",
        "limits[0].window",
        "limits[1].algorithm",
        "limits[1].limit",
        "limits[1].window",
      ]);
    }
  });

  it("an unknown or missing algorithm still names every other problem: a misspelt option, the limit, the window", () => {
    try {
      new RateLimiter({ algo: "gcra", limit: 0, window: "1m" } as never);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RateLimitConfigError);
      const issues = (e as RateLimitConfigError).issues;
      expect(issues.map((i) => i.path)).toEqual(["algorithm", "algo", "limit"]);
      expect(issues[1]?.message).toBe(
        "unknown option (known: algorithm, limit, window, name, align, buckets, weighted, capacity, mode, burst)",
      );
    }
    try {
      new RateLimiter({} as never);
      expect.unreachable();
    } catch (e) {
      expect((e as RateLimitConfigError).issues.map((i) => i.path)).toEqual(["algorithm", "limit", "window"]);
    }
    // An option of some algorithm is no typo while the algorithm is unknown: only the algorithm is named.
    expect(() => new RateLimiter({ algorithm: "gcr", limit: 1, window: "1s", burst: 2 } as never)).toThrow(
      /^algorithm: must be one of .* \(got "gcr"\)$/,
    );
  });

  it("options that are not an object", () => {
    for (const bad of [undefined, null, 5, "gcra"]) {
      expect(() => new RateLimiter(bad as never)).toThrow(RateLimitConfigError);
      expect(() => new RateLimiter(bad as never)).toThrow(/options/);
    }
  });

  it("the same checks apply to resolveLimit/resolveLimits and parseDuration, with the caller's path", () => {
    expect(() => resolveLimit({ algorithm: "gcra", limit: 1, window: "1s", burst: -2 }, "rules[3]")).toThrow(/rules\[3\]\.burst: .*-2/);
    expect(() => resolveLimits([{ algorithm: "fixed-window", limit: -1, window: "1m" }], "rules[0].limits")).toThrow(
      /rules\[0\]\.limits\[0\]\.limit: .*-1/,
    );
    expect(() => parseDuration("10 minutes", "ttl")).toThrow(/ttl: .*"10 minutes"/);
    expect(parseDuration("500ms", "x")).toBe(500);
    expect(parseDuration("10s", "x")).toBe(10_000);
    expect(parseDuration("1m", "x")).toBe(60_000);
    expect(parseDuration("1h", "x")).toBe(3_600_000);
    expect(parseDuration("1d", "x")).toBe(86_400_000);
    expect(parseDuration(250, "x")).toBe(250);
  });

  it("good configurations pass, with defaults resolved", () => {
    const l = new RateLimiter({ algorithm: "sliding-window", limit: 100, window: "1m" });
    expect(l.limits[0]).toMatchObject({ buckets: 1, weighted: true, capacity: 100, windowMs: 60_000 });
    expect(new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", burst: 4 }).maxCost).toBe(5);
    expect(new RateLimiter({ algorithm: "token-bucket", limit: 10, window: "1s" }).maxCost).toBe(10);
    expect(new RateLimiter({ algorithm: "leaky-bucket", limit: 10, window: "1s", capacity: 3, mode: "shape" }).limits[0]?.shape).toBe(true);
    expect(
      new RateLimiter({ algorithm: "fixed-window", limit: 1, window: 1, align: "first-request", name: "a.b:c-d_e" }).limits[0]?.alignFirst,
    ).toBe(true);
  });
});

describe("per-call input", () => {
  const limiter = new RateLimiter({
    limits: [
      { algorithm: "fixed-window", limit: 10, window: "1m" },
      { algorithm: "gcra", limit: 2, window: "1s", burst: 3 }, // capacity 4: the most one request may cost
    ],
    clock: () => 1_000_000,
  });

  it.each([
    ["0", 0],
    ["negative", -1],
    ["fractional", 1.5],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["a string", "2"],
    ["null", null],
  ])("cost %s is a RangeError naming cost and the value", async (_label, cost) => {
    for (const call of [
      () => limiter.consume("k", cost as number),
      () => limiter.peek("k", cost as number),
      () => limiter.refund("k", cost as number),
    ]) {
      const p = call();
      await expect(p).rejects.toThrow(RangeError);
      await expect(p).rejects.toThrow(/^cost: /);
      await expect(p).rejects.toThrow(String(typeof cost === "string" ? JSON.stringify(cost) : cost));
    }
  });

  it("a cost larger than the policy could ever admit is a RangeError (here 5 > gcra's burst + 1 = 4), never a silent denial", async () => {
    await expect(limiter.consume("k", 5)).rejects.toThrow(RangeError);
    await expect(limiter.consume("k", 5)).rejects.toThrow(/cost: 5 .*at most 4/);
    expect((await limiter.consume("k", 4)).allowed).toBe(true);
    for (const spec of [
      { algorithm: "fixed-window", limit: 3, window: "1m" },
      { algorithm: "sliding-log", limit: 3, window: "1m" },
      { algorithm: "sliding-window", limit: 3, window: "1m", buckets: 3 },
      { algorithm: "token-bucket", limit: 100, window: "1m", capacity: 3 },
      { algorithm: "leaky-bucket", limit: 100, window: "1m", capacity: 3, mode: "shape" },
    ] as const) {
      const l = new RateLimiter(spec);
      await expect(l.consume("k", 4)).rejects.toThrow(/cost: 4 .*at most 3/);
      expect((await l.consume("k", 3)).allowed).toBe(true);
    }
  });

  it.each([
    ["negative", -1],
    ["fractional", 0.5],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["a string", "100"],
    ["null", null],
  ])("maxDelayMs %s is a RangeError naming maxDelayMs and the value", async (_label, maxDelayMs) => {
    const p = limiter.consume("k", 1, maxDelayMs as number);
    await expect(p).rejects.toThrow(RangeError);
    await expect(p).rejects.toThrow(/^maxDelayMs: /);
    await expect(p).rejects.toThrow(String(typeof maxDelayMs === "string" ? JSON.stringify(maxDelayMs) : maxDelayMs));
    expect(() => limiter.consumeNow("k", 1, maxDelayMs as number)).toThrow(/^maxDelayMs: /);
  });

  it.each([
    ["empty", ""],
    ["not a string", 42],
    ["too long", "k".repeat(1025)],
  ])("key %s is a RangeError naming key", async (_label, key) => {
    await expect(limiter.consume(key as string)).rejects.toThrow(/^key: /);
    await expect(limiter.peek(key as string)).rejects.toThrow(RangeError);
    await expect(limiter.reset(key as string)).rejects.toThrow(RangeError);
  });

  it("a clock that returns a non-finite time is a RangeError naming clock", async () => {
    const l = new RateLimiter({ algorithm: "gcra", limit: 1, window: "1s", clock: () => NaN });
    await expect(l.consume("k")).rejects.toThrow(/^clock: .*NaN/);
  });
});

describe("MemoryStore options", () => {
  it.each([
    ["maxKeys 1", { maxKeys: 1 }, "maxKeys", "1"],
    ["maxKeys 0", { maxKeys: 0 }, "maxKeys", "0"],
    ["maxKeys fractional", { maxKeys: 10.5 }, "maxKeys", "10.5"],
    ["maxKeys a string", { maxKeys: "100" }, "maxKeys", '"100"'],
    ["sweepIntervalMs negative", { sweepIntervalMs: -1 }, "sweepIntervalMs", "-1"],
    ["sweepIntervalMs NaN", { sweepIntervalMs: NaN }, "sweepIntervalMs", "NaN"],
  ])("%s", (_label, options, field, shown) => {
    expect(() => new MemoryStore(options as never)).toThrow(RateLimitConfigError);
    expect(() => new MemoryStore(options as never)).toThrow(new RegExp(`${field}: .*${shown.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
  });
});

describe("collectIssues", () => {
  it("returns the result when nothing is wrong, and adds no issue", () => {
    const issues: ConfigIssue[] = [];
    expect(collectIssues(issues, () => parseDuration("2s", "window"))).toBe(2000);
    expect(issues).toEqual([]);
  });

  it("gathers a RateLimitConfigError's issues, so one error can list every problem", () => {
    const issues: ConfigIssue[] = [];
    expect(collectIssues(issues, () => parseDuration("soon", "window"))).toBeUndefined();
    expect(collectIssues(issues, () => resolveLimits([{ algorithm: "gcra", limit: 0, window: "1s" }], "limits"))).toBeUndefined();
    expect(issues.map((i) => i.path)).toEqual(["window", "limits[0].limit"]);
  });

  it("rewrites or drops each issue through the optional function", () => {
    const issues: ConfigIssue[] = [];
    collectIssues(
      issues,
      () => resolveLimit({ algorithm: "gcra", limit: 0, window: 0 }),
      (i) => (i.path === "window" ? undefined : { path: `rules[2].${i.path}`, message: i.message }),
    );
    expect(issues.map((i) => i.path)).toEqual(["rules[2].limit"]);
  });

  it("lets any other error through", () => {
    expect(() =>
      collectIssues([], () => {
        throw new TypeError("not a config problem");
      }),
    ).toThrow(TypeError);
  });
});
