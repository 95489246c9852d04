/**
 * Rules (schema + matching) and decide() in-process, with a manual clock: no transport.
 */
import { describe, expect, it } from "vitest";
import { MemoryStore, type Store } from "ratekeeper";
import {
  CheckError,
  DecisionService,
  compileRules,
  descriptorKey,
  matchDescriptor,
  parseDescriptorKey,
  resultJson,
  parseRules,
  RulesError,
} from "../src/index.js";
import type { Override, OverrideLookup } from "../src/overrides/types.js";

const YAML = `
policies:
  p: { algorithm: fixed-window, limit: 2, window: 1m }
domains:
  - domain: d
    descriptors:
      - key: k
        value: exact
        algorithm: fixed-window
        limit: 1
        window: 1m
      - key: k
        value: pre*
        algorithm: fixed-window
        limit: 2
        window: 1m
      - key: k
        algorithm: fixed-window
        limit: 3
        window: 1m
      - key: a
        descriptors:
          - key: b
            algorithm: fixed-window
            limit: 4
            window: 1m
`;

const e = (pairs: Record<string, string>) => Object.entries(pairs).map(([key, value]) => ({ key, value }));

describe("rules: validation", () => {
  it("names the file and the path of every problem", () => {
    const bad = `domains:
  - domain: d
    descriptors:
      - key: x
        algorithm: gcra
        limit: 0
        window: 1s
      - key: y
        limits: [{ algorithm: nope, limit: 1, window: 1s }]
      - key: z
        algorithm: token-bucket
        limit: 5
        window: 1s
        cost: 9
      - key: w
        unlimited: true
        algorithm: gcra
        limit: 1
        window: 1s
      - key: v
        unlimited: true
        rate_limit: { unit: second, requests_per_unit: 0 }
  - domain: d
`;
    let err: RulesError | undefined;
    try {
      parseRules(bad, "rules.yaml");
    } catch (x) {
      err = x as RulesError;
    }
    expect(err).toBeInstanceOf(RulesError);
    // Each line also names its line:column (checked in hostile/rules-errors.test.ts); here the paths.
    const lines = err!.message.split("\n").map((l) => l.replace(/^rules\.yaml:\d+:\d+:/, "rules.yaml:"));
    expect(lines).toContain("rules.yaml: domains[0].descriptors[0].limit: must be a positive whole number (got 0)");
    expect(lines.some((l) => l.startsWith("rules.yaml: domains[0].descriptors[1].limits[0].algorithm: must be one of"))).toBe(true);
    expect(lines).toContain("rules.yaml: domains[0].descriptors[2].cost: must be at most 5, the most this policy could ever admit (got 9)");
    expect(lines).toContain("rules.yaml: domains[0].descriptors[3].unlimited: an unlimited rule cannot also have a policy");
    // Unlimited and deny-all (requests_per_unit 0) at once: a contradiction, refused like any policy.
    expect(lines).toContain("rules.yaml: domains[0].descriptors[4].unlimited: an unlimited rule cannot also have a policy");
    expect(lines).toContain('rules.yaml: domains[1].domain: duplicate domain "d"');
  });

  it("structural errors come from the schema, with paths", () => {
    let err: RulesError | undefined;
    try {
      compileRules({ domains: [{ domain: "d", descriptors: [{ key: "k=", value: "a*b", unlimited: true }] }], extra: 1 }, "f.yaml");
    } catch (x) {
      err = x as RulesError;
    }
    expect(err?.message.split("\n")).toEqual([
      "f.yaml: domains[0].descriptors[0].key: must not contain '=', '|' or a newline",
      'f.yaml: Unrecognized key: "extra"',
    ]);
  });
});

describe("rules: matching (envoyproxy/ratelimit semantics)", () => {
  const rules = parseRules(YAML, "r.yaml");
  it("prefers the exact value, then a wildcard prefix, then any value", () => {
    expect(matchDescriptor(rules, "d", e({ k: "exact" })).rule?.limits[0]?.limit).toBe(1);
    expect(matchDescriptor(rules, "d", e({ k: "prefix-x" })).rule?.limits[0]?.limit).toBe(2);
    expect(matchDescriptor(rules, "d", e({ k: "other" })).rule?.limits[0]?.limit).toBe(3);
  });
  it("applies a limit only when the last entry lands on a rule", () => {
    expect(matchDescriptor(rules, "d", e({ a: "1", b: "2" })).rule?.id).toBe("d/a/b");
    expect(matchDescriptor(rules, "d", e({ a: "1" })).rule).toBeUndefined();
    expect(matchDescriptor(rules, "d", e({ k: "x", more: "y" })).miss).toMatch(/stop at depth 1/);
    expect(matchDescriptor(rules, "zz", e({ k: "x" })).miss).toMatch(/no domain "zz"/);
  });
  it("canonical descriptor keys round-trip", () => {
    const entries = e({ remote_address: "1.2.3.4", path: "/api" });
    expect(descriptorKey(entries)).toBe("remote_address=1.2.3.4|path=/api");
    expect(parseDescriptorKey("remote_address=1.2.3.4|path=/api")).toEqual(entries);
    expect(parseDescriptorKey("novalue")).toBeUndefined();
  });
});

describe("decide() with overrides", () => {
  const rules = parseRules(YAML, "r.yaml");
  let nowMs = 1_000_000;
  const table = new Map<string, Override>();
  const overrides: OverrideLookup = {
    get: (domain, key, at) => {
      const o = table.get(`${domain}/${key}`);
      return o && (o.expiresAtMs === undefined || o.expiresAtMs > at) ? o : undefined;
    },
  };
  const svc = new DecisionService({ store: new MemoryStore(), rules, overrides, clock: () => nowMs, injectClock: true });
  const one = async (value: string) => (await svc.decide({ domain: "d", descriptors: [e({ k: value })] })).statuses[0]!;

  it("uses the rule without an override, the override's policy with one", async () => {
    expect((await one("u1")).limit).toBe(3);
    table.set("d/k=u1", {
      domain: "d",
      key: "k=u1",
      policy: { limits: [{ algorithm: "fixed-window", limit: 10, window: "1m" }] },
      note: "vip",
    });
    const s = await one("u1");
    expect(s).toMatchObject({ limit: 10, remaining: 9, allowed: true });
    expect(s.explain.source).toBe("override");
    expect(s.explain.why).toContain("vip");
  });

  it("unlimited and blocked overrides, and expiry", async () => {
    table.set("d/k=u2", { domain: "d", key: "k=u2", policy: "unlimited" });
    table.set("d/k=u3", { domain: "d", key: "k=u3", policy: "blocked", expiresAtMs: nowMs + 30_000 });
    expect(await one("u2")).toMatchObject({ allowed: true, unlimited: true });
    expect(await one("u3")).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 30_000 });
    nowMs += 30_000;
    expect(await one("u3")).toMatchObject({ allowed: true, limit: 3 });
  });

  it("an override applies even where no rule matches (block one address)", async () => {
    table.set("d/nope=x", { domain: "d", key: "nope=x", policy: "blocked" });
    const r = await svc.decide({ domain: "d", descriptors: [e({ nope: "x" })] });
    expect(r.allowed).toBe(false);
  });

  it("overrides where no rule matches are counted under one bounded label: keys are never labels", async () => {
    // An operator blocking many addresses (or giving them their own policy) must not make a
    // metrics series and a dashboard row per address.
    const seen: string[] = [];
    const observer = {
      decision: (domain: string, rule: string) => void seen.push(`${domain} ${rule}`),
      storeLatency: () => {},
      storeError: () => {},
    };
    const watched = new DecisionService({ store: new MemoryStore(), rules, overrides, observer, clock: () => nowMs, injectClock: true });
    const limits = { limits: [{ algorithm: "fixed-window" as const, limit: 5, window: "1m" as const }] };
    for (let i = 0; i < 3; i++) table.set(`d/ip=10.0.0.${i}`, { domain: "d", key: `ip=10.0.0.${i}`, policy: "blocked" });
    table.set("d/ip=10.0.1.1", { domain: "d", key: "ip=10.0.1.1", policy: limits });
    table.set("d/ip=10.0.1.2", { domain: "d", key: "ip=10.0.1.2", policy: "unlimited" });
    for (const ip of ["10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.1.1", "10.0.1.2"]) {
      const r = await watched.decide({ domain: "d", descriptors: [e({ ip })] });
      expect(r.statuses[0]!.explain.rule).toBe(`d/ip=${ip}`); // the answer still names the override
    }
    expect(new Set(seen)).toEqual(new Set(["d (override)"]));
  });

  it("a bad request is a CheckError, not a denial", async () => {
    await expect(svc.decide({ domain: "d", descriptors: [e({ k: "u9" })], cost: 0 })).rejects.toBeInstanceOf(CheckError);
    await expect(svc.decide({ key: "x", policy: "missing" })).rejects.toThrow(/no policy named "missing" \(known: p\)/);
  });

  it("decideNow answers in the same call on the memory store, with what decide() gives; a store's promise is passed on", async () => {
    const now = svc.decideNow({ domain: "d", descriptors: [e({ k: "sync1" })] });
    expect(now).not.toBeInstanceOf(Promise);
    expect(now).toMatchObject({ allowed: true, statuses: [{ limit: 3, remaining: 2 }] });
    expect(await one("sync1")).toMatchObject({ limit: 3, remaining: 1 });
    expect(() => svc.decideNow({ domain: "d", descriptors: [e({ k: "sync1" })], cost: 0 })).toThrow(CheckError);
    // Several descriptors: a promise, each decided (charged) even when another cannot be.
    const several = svc.decideNow({ domain: "d", descriptors: [e({ k: "sync2" }), e({ k: "sync3" })] });
    expect(several).toBeInstanceOf(Promise);
    expect((await several).statuses.map((st) => st.remaining)).toEqual([2, 2]);
    // A store that answers with promises (as RedisStore does): decideNow returns one.
    const mem = new MemoryStore();
    const slow: Store = {
      ...mem,
      bind: (limits, ns) => {
        const b = mem.bind(limits, ns);
        return { ...b, consume: (k, c, t) => Promise.resolve(b.consume(k, c, t)), peek: (k, c, t) => Promise.resolve(b.peek(k, c, t)) };
      },
    };
    const viaPromise = new DecisionService({ store: slow, rules, clock: () => nowMs, injectClock: true });
    const p = viaPromise.decideNow({ domain: "d", descriptors: [e({ k: "x" })] });
    expect(p).toBeInstanceOf(Promise);
    expect(await p).toMatchObject({ allowed: true, statuses: [{ remaining: 2 }] });
    await expect(viaPromise.decide({ domain: "d", descriptors: [e({ k: "x" })], cost: 99 })).rejects.toBeInstanceOf(CheckError);
  });

  it("the hand-written JSON of a result is exactly JSON.stringify's, for every kind of status", async () => {
    table.set("d/k=j1", { domain: "d", key: "k=j1", policy: "blocked", note: 'a "quoted" note' });
    table.set("d/k=j2", { domain: "d", key: "k=j2", policy: "unlimited" });
    const r = await svc.decide({
      domain: "d",
      descriptors: [
        e({ k: "j1" }),
        e({ k: "j2" }),
        e({ k: 'we"ird\\value\u2028' }),
        e({ k: "tab\there\u0001 pair \ud83d\ude00 \u00e9" }),
        e({ k: "\u00e9\u4e2d" }),
        e({ zz: "none" }),
        e({ a: "x", b: "y" }),
        e({ k: "exact" }),
      ],
    });
    expect(r.statuses).toHaveLength(8);
    expect(resultJson(r)).toBe(JSON.stringify(r));
    const denied = await svc.decide({ domain: "d", descriptors: [e({ k: "exact" })] });
    expect(denied.allowed).toBe(false);
    expect(resultJson(denied)).toBe(JSON.stringify(denied));
    const plain = await svc.decide({ key: "j", policy: "p" });
    expect(resultJson(plain)).toBe(JSON.stringify(plain));
  });

  it("a reload keeps the state of unchanged policies", async () => {
    await svc.decide({ key: "z", policy: "p" });
    svc.setRules(parseRules(YAML.replace("limit: 4", "limit: 40"), "r.yaml"));
    const s = (await svc.decide({ key: "z", policy: "p" })).statuses[0]!;
    expect(s.remaining).toBe(0);
  });
});
