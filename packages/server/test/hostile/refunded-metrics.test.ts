/**
 * A decision whose charge was given back, because its check or batch was answered with an error
 * (failed-check-refunds.test.ts), admitted nothing: the client got a 503, and the store holds no
 * charge. `ratekeeper_decisions_total` must not count it as `ok` (admitted); it is counted under
 * `outcome="refunded"`. A refund that fails leaves the charge in the store: that decision stays
 * `ok`. Read through a scrape of the service's metrics. The same for envoyproxy/ratelimit's
 * per-limit stats (`ratelimit_service_rate_limit_*`): `total_hits` and `within_limit` (and
 * `near_limit`) do not keep a refunded hit, as envoyproxy/ratelimit counts no hit of a call its
 * cache failed; one scraped before its refund is taken from the next ones.
 */
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { DecisionCounts, type DecisionLabels } from "../../src/decision-counts.js";
import { DashboardStats, TeeObserver } from "../../src/dashboard/stats.js";
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

async function setup(n: number, refundsFail = false) {
  const parts = storeFailingOnCall(n, () => new Error("connection lost"), refundsFail);
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
  /** The decisions counter's value for `outcome` (0 when not listed), from a scrape. */
  const counted = async (outcome: string) => {
    const text = await metrics.registry.metrics();
    const line = text.split("\n").find((l) => l.startsWith("ratekeeper_decisions_total{") && l.includes(`outcome="${outcome}"`));
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
  };
  /** envoyproxy/ratelimit's total_hits and within_limit of the rule, from a scrape. */
  const envoy = async () => [await envoyStat(metrics.registry, "total_hits"), await envoyStat(metrics.registry, "within_limit")];
  return { ...parts, post, counted, envoy };
}

/** The value of `ratelimit_service_rate_limit_<stat>` for domain d, key1 k (0 when not listed). */
async function envoyStat(registry: Registry, name: string): Promise<number> {
  const text = await registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`ratelimit_service_rate_limit_${name}{domain="d",key1="k"}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const one = (v: string) => ({ domain: "d", descriptors: [{ k: v }] });

describe("metrics of a decision whose charge was given back", () => {
  it("a batch answered 503: its admitted checks are counted refunded, not ok; its retry is ok", async () => {
    const t = await setup(2);
    expect(await t.post({ checks: [one("a"), one("b"), one("c")] })).toBe(503);
    expect([await t.counted("ok"), await t.counted("refunded")]).toEqual([0, 2]);
    expect(await t.envoy()).toEqual([0, 0]);
    expect(await t.post({ checks: [one("a"), one("b"), one("c")] })).toBe(200);
    expect([await t.counted("ok"), await t.counted("refunded")]).toEqual([3, 2]);
    expect(await t.envoy()).toEqual([3, 3]);
  });

  it("a check of several descriptors answered 503: the same", async () => {
    const t = await setup(2);
    expect(await t.post({ domain: "d", descriptors: [{ k: "a" }, { k: "b" }, { k: "c" }] })).toBe(503);
    expect([await t.counted("ok"), await t.counted("refunded")]).toEqual([0, 2]);
    expect(await t.envoy()).toEqual([0, 0]);
  });

  it("a refund that fails leaves the charge in the store: that decision stays ok", async () => {
    const t = await setup(2, true);
    expect(await t.post({ checks: [one("a"), one("b"), one("c"), one("d")] })).toBe(503);
    expect(t.refunds()).toBe(3);
    expect([await t.counted("ok"), await t.counted("refunded")]).toEqual([3, 0]);
    expect(await t.envoy()).toEqual([3, 3]);
  });
});

describe("the counts behind ratekeeper_decisions_total", () => {
  it("an ok scraped before its refund is taken from the next oks: the counter never goes down", () => {
    const c = new DecisionCounts();
    const handed: [DecisionLabels, number][] = [];
    const flush = () => c.flush((labels, n) => handed.push([labels, n]));
    c.count("d", "d/k", "ok");
    flush();
    c.refunded("d", "d/k");
    flush();
    c.count("d", "d/k", "ok");
    c.count("d", "d/k", "ok");
    flush();
    expect(handed.map(([l, n]) => [l.outcome, n])).toEqual([
      ["ok", 1],
      ["refunded", 1],
      ["ok", 1],
    ]);
  });
});

describe("EnvoyStats.refunded", () => {
  const statKey = { key: "d.k", domain: "d", valued: false, shadow: false };

  it("takes a hit back, near_limit too; one scraped before it is taken from the next ones", async () => {
    const registry = new Registry();
    const s = new EnvoyStats(registry);
    s.hit(statKey, 5, 3, 2); // 3 -> 5 of 5: within 2, near 1 (above floor(5 x 0.8) = 4)
    s.refunded(statKey, 5, 3, 2);
    const all = async () => [
      await envoyStat(registry, "total_hits"),
      await envoyStat(registry, "within_limit"),
      await envoyStat(registry, "near_limit"),
    ];
    expect(await all()).toEqual([0, 0, 0]);
    s.hit(statKey, 5, 0, 1);
    expect(await envoyStat(registry, "total_hits")).toBe(1); // scraped
    s.refunded(statKey, 5, 0, 1);
    expect(await envoyStat(registry, "total_hits")).toBe(1); // never down
    s.hit(statKey, 5, 0, 1);
    expect(await envoyStat(registry, "total_hits")).toBe(1); // the refund took this one
    s.hit(statKey, 5, 0, 1);
    expect(await envoyStat(registry, "total_hits")).toBe(2);
  });
});

describe("the dashboard's counts of a decision whose charge was given back", () => {
  it("are not allowed: a batch answered 503 leaves the rule's allowed total and this second's count at 0", async () => {
    const parts = storeFailingOnCall(2, () => new Error("connection lost"));
    const stats = new DashboardStats(0);
    const observer = new TeeObserver(new Metrics(), stats);
    const service = new DecisionService({ store: parts.store, rules: parseRules(RULES, "r.yaml"), observer, logger: captureLog().logger });
    const s = await serveHttp(service);
    close = s.close;
    const post = async (body: unknown) => (await fetch(`${s.url}/v1/check`, { method: "POST", body: JSON.stringify(body) })).status;
    expect(await post({ checks: [one("a")] })).toBe(200);
    stats.tick();
    expect(await post({ checks: [one("b"), one("c"), one("d")] })).toBe(503);
    stats.tick();
    const c = stats.rules()[0];
    expect([c?.allowed, c?.allowedPerSecond.at(-2), c?.allowedPerSecond.at(-1)]).toEqual([1, 1, 0]);
  });
});
