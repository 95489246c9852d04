/**
 * envoyproxy/ratelimit's per-limit stats (`ratelimit_service_rate_limit_*`) of a hit whose charge
 * was given back because its check or batch was answered with an error (failed-check-refunds):
 * the client got a 503 and the store holds no charge, as envoyproxy/ratelimit, which counts no
 * hit of a call its cache failed. `total_hits` and `within_limit` (and `near_limit`) must not
 * keep it; a refund that fails leaves the charge, and the hit. A hit scraped before its refund is
 * taken from the next ones: a Prometheus counter never goes down. (refunded-metrics.test.ts is
 * the same for ratekeeper_decisions_total.)
 */
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { EnvoyStats } from "../../src/envoy-stats.js";
import { DecisionService, Metrics, parseRules } from "../../src/index.js";
import { captureLog, serveHttp, storeFailingOnCall } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;

let close: (() => void) | undefined;
afterEach(() => close?.());

/** The value of `ratelimit_service_rate_limit_<stat>` for domain d, key1 k (0 when not listed). */
async function stat(registry: Registry, name: string): Promise<number> {
  const text = await registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`ratelimit_service_rate_limit_${name}{domain="d",key1="k"}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

async function setup(failOnCall: number, refundsFail = false) {
  const parts = storeFailingOnCall(failOnCall, () => new Error("connection lost"), refundsFail);
  const metrics = new Metrics();
  const service = new DecisionService({
    store: parts.store,
    rules: parseRules(RULES, "r.yaml"),
    observer: metrics,
    logger: captureLog().logger,
  });
  const s = await serveHttp(service);
  close = s.close;
  const post = async (body: unknown) => (await fetch(`${s.url}/v1/check`, { method: "POST", body: JSON.stringify(body) })).status;
  const stats = async () => [await stat(metrics.registry, "total_hits"), await stat(metrics.registry, "within_limit")];
  return { ...parts, post, stats };
}

const one = (v: string) => ({ domain: "d", descriptors: [{ k: v }] });

describe("envoyproxy/ratelimit's per-limit stats of a hit whose charge was given back", () => {
  it("a batch answered 503: its admitted hits are not counted; its retry is", async () => {
    const t = await setup(2);
    expect(await t.post({ checks: [one("a"), one("b"), one("c")] })).toBe(503);
    expect(await t.stats()).toEqual([0, 0]);
    expect(await t.post({ checks: [one("a"), one("b"), one("c")] })).toBe(200);
    expect(await t.stats()).toEqual([3, 3]);
  });

  it("a check of several descriptors answered 503: the same", async () => {
    const t = await setup(2);
    expect(await t.post({ domain: "d", descriptors: [{ k: "a" }, { k: "b" }, { k: "c" }] })).toBe(503);
    expect(await t.stats()).toEqual([0, 0]);
  });

  it("a refund that fails leaves the charge in the store: its hit stays counted", async () => {
    const t = await setup(2, true);
    expect(await t.post({ checks: [one("a"), one("b"), one("c"), one("d")] })).toBe(503);
    expect(t.refunds()).toBe(3);
    expect(await t.stats()).toEqual([3, 3]);
  });
});

describe("EnvoyStats.refunded", () => {
  const statKey = { key: "d.k", domain: "d", valued: false, shadow: false };

  it("takes a hit back, near_limit too; one scraped before it is taken from the next ones", async () => {
    const registry = new Registry();
    const s = new EnvoyStats(registry);
    s.hit(statKey, 5, 3, 2); // 3 -> 5 of 5: within 2, near 1 (above floor(5 x 0.8) = 4)
    s.refunded(statKey, 5, 3, 2);
    expect([await stat(registry, "total_hits"), await stat(registry, "within_limit"), await stat(registry, "near_limit")]).toEqual([
      0, 0, 0,
    ]);
    s.hit(statKey, 5, 0, 1);
    expect(await stat(registry, "total_hits")).toBe(1); // scraped
    s.refunded(statKey, 5, 0, 1);
    expect(await stat(registry, "total_hits")).toBe(1); // never down
    s.hit(statKey, 5, 0, 1);
    expect(await stat(registry, "total_hits")).toBe(1); // the refund took this one
    s.hit(statKey, 5, 0, 1);
    expect(await stat(registry, "total_hits")).toBe(2);
  });
});
