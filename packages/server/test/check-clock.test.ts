/**
 * A check reads the service's clock only when something needs the time (overrides, blocks,
 * deny-all rules), once per check whatever its descriptors; and the Prometheus decision counts
 * stay exact when consecutive decisions switch rule, domain and outcome (the metrics keep the
 * last rule's counts at hand).
 */
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../src/index.js";
import { createLogger } from "../src/log.js";
import { Metrics } from "../src/metrics.js";
import { createHttpServer } from "../src/transport/http.js";
import type { Override, OverrideLookup } from "../src/overrides/types.js";

const YAML = `
domains:
  - domain: d
    descriptors:
      - key: k
        algorithm: fixed-window
        limit: 2
        window: 1m
      - key: j
        algorithm: fixed-window
        limit: 5
        window: 1m
      - key: z
        rate_limit: { unit: minute, requests_per_unit: 0 }
`;

function counted(): { clock: () => number; reads: () => number } {
  let n = 0;
  return {
    clock: () => {
      n++;
      return 1_000_000;
    },
    reads: () => n,
  };
}

const d = (entries: Record<string, string>[]) => ({
  domain: "d",
  descriptors: entries.map((o) => Object.entries(o).map(([key, value]) => ({ key, value }))),
});

describe("the service's clock", () => {
  it("is not read for a check that needs no time", async () => {
    const c = counted();
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), clock: c.clock });
    expect(svc.decideNow(d([{ k: "a" }]))).not.toBeInstanceOf(Promise);
    await svc.decide(d([{ k: "a" }, { j: "b" }, { nope: "x" }]));
    expect(c.reads()).toBe(0);
  });

  it("is read once per check with overrides, and a block's retry comes from that reading", async () => {
    const c = counted();
    const table = new Map<string, Override>([["d/k=b", { domain: "d", key: "k=b", policy: "blocked", expiresAtMs: 1_030_000 }]]);
    const overrides: OverrideLookup = {
      get: (domain, key, at) => ((table.get(`${domain}/${key}`)?.expiresAtMs ?? 0) > at ? table.get(`${domain}/${key}`) : undefined),
    };
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), clock: c.clock, overrides });
    const r = await svc.decide(d([{ k: "a" }, { k: "b" }, { j: "c" }]));
    expect(c.reads()).toBe(1);
    expect(r.statuses[1]).toMatchObject({ allowed: false, reason: "blocked", retryAfterMs: 30_000 });
  });

  it("is read for a deny-all rule, whose window ends by it", async () => {
    const c = counted();
    const svc = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), clock: c.clock });
    const r = await svc.decide(d([{ z: "1" }]));
    expect(c.reads()).toBe(1);
    expect(r.statuses[0]?.retryAfterMs).toBe(60_000 - (1_000_000 % 60_000));
  });
});

describe("X-RateLimit-Reset (an epoch time) over HTTP", () => {
  it("is on the service's clock when the limiters are given it (injectClock)", async () => {
    // The header adds the decision's resetAfterMs (a duration on the limiters' clock) to a clock
    // reading; the transport read Date.now(), off by the gap from the injected clock.
    const t = 1_700_000_040_000; // a minute's start
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(YAML, "r.yaml"), clock: () => t, injectClock: true });
    const opts = { service, metrics: new Metrics(), logger: createLogger("silent"), readiness: () => ({ ready: true }) };
    const server = await createHttpServer({ ...opts, headerStyles: ["x-ratelimit"] });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/v1/check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(d([{ k: "a" }])),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-reset")).toBe("1700000100");
    } finally {
      server.close();
    }
  });
});

describe("Prometheus decision counts", () => {
  it("count every decision under its domain, rule and outcome as they switch", async () => {
    const m = new Metrics();
    const model = new Map<string, number>();
    const seq: [string, string, string][] = [];
    const domains = ["a", "b"];
    const rules = ["a/x", "a/y", ""];
    const outcomes = ["ok", "over_limit", "no_match"];
    let x = 7;
    for (let i = 0; i < 400; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      // Equal strings that are not the same string, as a parsed body gives them.
      const domain = `${domains[x % 2] as string}${""}`.slice(0);
      seq.push([domain, rules[(x >> 3) % 3] as string, outcomes[(x >> 7) % 3] as string]);
    }
    for (const [i, [domain, rule, outcome]] of seq.entries()) {
      m.decision(domain, rule, outcome);
      const k = `${domain}|${rule}|${outcome}`;
      model.set(k, (model.get(k) ?? 0) + 1);
      if (i === 150) await m.registry.metrics(); // a scrape in between moves the counts into prom-client
    }
    const json = await m.registry.getSingleMetric("ratekeeper_decisions_total")!.get();
    const got = new Map(
      json.values.filter((v) => v.value > 0).map((v) => [`${v.labels.domain}|${v.labels.rule}|${v.labels.outcome}`, v.value]),
    );
    expect(got).toEqual(model);
  });
});
