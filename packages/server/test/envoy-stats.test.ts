/**
 * envoyproxy/ratelimit's per-limit stats in /metrics, with the names and labels its Prometheus
 * sink gives them (src/stats/prom/default_mapper.yaml: `ratelimit_service_rate_limit_<stat>` with
 * `domain`, `key1` and, for deeper keys, `key2`), counted as its base limiter counts them
 * (src/limiter/base_limiter.go: total_hits, within_limit, over_limit, near_limit with its
 * NEAR_LIMIT_RATIO, shadow_mode), after gRPC traffic with the official protos.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearOfMinuteEdge, serveRules, type InProcessService } from "./in-process.js";
import { rlsClient, type RlsClient } from "./support.js";

const CONFIG = `
domain: s
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: path
    value: /api
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: shadowed
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: dm
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: banned
    rate_limit: { unit: minute, requests_per_unit: 0 }
  - key: free
    rate_limit: { unlimited: true }
  - key: vtm
    value_to_metric: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: route
    value_to_metric: true
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 5 }
`;

let svc: InProcessService;
let rls: RlsClient;

beforeAll(async () => {
  await clearOfMinuteEdge(); // its counts are in minute windows aligned on the clock
  svc = await serveRules(CONFIG, { maxDetailedMetricKeys: 3 });
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.close();
});

const d = (...kv: string[]) => ({ entries: kv.map((s) => ({ key: s.split("=")[0], value: s.split("=")[1] ?? "" })) });
const ask = (descriptors: object[], hits_addend = 0) => rls.shouldRateLimit({ domain: "s", descriptors, hits_addend });

/** The value of each series of `ratelimit_service_rate_limit_<stat>` whose labels are exactly `labels`. */
async function stat(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const line = text.split("\n").find((l) => l.startsWith(`ratelimit_service_rate_limit_${name}{${want}} `));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

async function stats(labels: Record<string, string>): Promise<Record<string, number | undefined>> {
  const out: Record<string, number | undefined> = {};
  for (const n of ["total_hits", "within_limit", "near_limit", "over_limit", "shadow_mode"]) out[n] = await stat(n, labels);
  return out;
}

describe("envoyproxy/ratelimit's stats as Prometheus counters", () => {
  it("per rule key: total, within, near (ratio 0.8 of 5: the 5th hit), over", async () => {
    for (let i = 0; i < 7; i++) await ask([d("user=a")]);
    expect(await stats({ domain: "s", key1: "user" })).toEqual({
      total_hits: 7,
      within_limit: 5,
      near_limit: 1,
      over_limit: 2,
      // A series appears with its first hit, as gostats flushes only counters that moved.
      shadow_mode: undefined,
    });
    expect(await stat("total_hits", { domain: "s", key1: "user_a" })).toBeUndefined();
  });

  it("a deeper key has key2; hits_addend is counted in units, split across thresholds as it splits them", async () => {
    await ask([d("path=/api", "user=b")], 7); // 0 -> 7: within 7 (near starts above 8)
    await ask([d("path=/api", "user=b")], 4); // 7 -> 11: over 1, near 10 - max(8, 7) = 2
    expect(await stats({ domain: "s", key1: "path_/api", key2: "user" })).toEqual({
      total_hits: 11,
      within_limit: 7,
      near_limit: 2,
      over_limit: 1,
      shadow_mode: undefined,
    });
  });

  it("shadow mode: over the limit is counted as over_limit and shadow_mode, and the answer is OK", async () => {
    for (let i = 0; i < 3; i++) expect((await ask([d("shadowed=x")])).overall_code).toBe("OK");
    expect(await stats({ domain: "s", key1: "shadowed" })).toMatchObject({ total_hits: 3, within_limit: 2, over_limit: 1, shadow_mode: 1 });
  });

  it("requests_per_unit 0: every hit is over; unlimited and unmatched descriptors have no stats", async () => {
    await ask([d("banned=x"), d("free=y"), d("nothing=z")]);
    expect(await stat("over_limit", { domain: "s", key1: "banned" })).toBe(1);
    expect(await stat("total_hits", { domain: "s", key1: "free" })).toBeUndefined();
    expect(await stat("total_hits", { domain: "s", key1: "nothing" })).toBeUndefined();
  });

  it("detailed_metric: one series per value (IPv4 dots and ':' sanitised as its SanitizeStatName), at most the cap, then (overflow)", async () => {
    await ask([d("dm=v1")]);
    await ask([d("dm=10.0.0.1:80")]);
    await ask([d("dm=v1")]);
    expect(await stat("total_hits", { domain: "s", key1: "dm_v1" })).toBe(2);
    expect(await stat("total_hits", { domain: "s", key1: "dm_10_0_0_1_80" })).toBe(1);
    // The cap is 3 value-carrying series: a third value fits, the next ones overflow.
    await ask([d("dm=v3")]);
    await ask([d("dm=v4")]);
    await ask([d("dm=v5")]);
    expect(await stat("total_hits", { domain: "s", key1: "dm_v3" })).toBe(1);
    expect(await stat("total_hits", { domain: "s", key1: "dm_v4" })).toBeUndefined();
    expect(await stat("total_hits", { domain: "s", key1: "(overflow)" })).toBe(2);
  });

  it("detailed_metric with an empty value: key_ (its GetLimit writes key + '_' + value), unlike a descriptor's own limit", async () => {
    const fresh = await serveRules(CONFIG);
    const c = rlsClient(fresh.grpcPort);
    try {
      await c.shouldRateLimit({ domain: "s", descriptors: [d("dm"), { ...d("own"), limit: { requests_per_unit: 3, unit: "MINUTE" } }] });
      const text = await (await fetch(`http://127.0.0.1:${fresh.httpPort}/metrics`)).text();
      expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="s",key1="dm_"} 1');
      expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="s",key1="own"} 1');
    } finally {
      c.close();
      await fresh.close();
    }
  });

  it("a descriptor's own limit (its key carries the values) shares the cap", async () => {
    await ask([{ ...d("own=q"), limit: { requests_per_unit: 3, unit: "MINUTE" } }]);
    expect(await stat("total_hits", { domain: "s", key1: "own_q" })).toBeUndefined();
    expect(await stat("total_hits", { domain: "s", key1: "(overflow)" })).toBe(3);
  });

  it("value_to_metric: the request's value in the key at that node, as its GetLimit builds it (sharing the cap)", async () => {
    const fresh = await serveRules(CONFIG);
    const c = rlsClient(fresh.grpcPort);
    try {
      await c.shouldRateLimit({ domain: "s", descriptors: [d("vtm=abc"), d("route=/a", "user=u")] });
      const text = await (await fetch(`http://127.0.0.1:${fresh.httpPort}/metrics`)).text();
      expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="s",key1="vtm_abc"} 1');
      expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="s",key1="route_/a",key2="user"} 1');
    } finally {
      c.close();
      await fresh.close();
    }
  });

  it("check-only (hits_addend 0 on the descriptor) counts nothing", async () => {
    const before = await stat("total_hits", { domain: "s", key1: "user" });
    await ask([{ ...d("user=c"), hits_addend: { value: 0 } }]);
    expect(await stat("total_hits", { domain: "s", key1: "user" })).toBe(before);
  });
});

describe("its service counters", () => {
  it("ratelimit_service_should_rate_limit_error{err_type=service_error}: a request it refuses, over gRPC and /json", async () => {
    await expect(rls.shouldRateLimit({ domain: "", descriptors: [d("user=z")] })).rejects.toMatchObject({ code: 2 });
    await fetch(`http://127.0.0.1:${svc.httpPort}/json`, { method: "POST", body: '{"domain": "s"}' });
    const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
    expect(text).toContain('ratelimit_service_should_rate_limit_error{err_type="service_error"} 2');
  });

  it("ratelimit_service_global_shadow_mode: answers turned OK by SHADOW_MODE", async () => {
    const shadowed = await serveRules(CONFIG, { globalShadowMode: true });
    const c = rlsClient(shadowed.grpcPort);
    try {
      for (let i = 0; i < 3; i++) expect((await c.shouldRateLimit({ domain: "s", descriptors: [d("banned=q")] })).overall_code).toBe("OK");
      const text = await (await fetch(`http://127.0.0.1:${shadowed.httpPort}/metrics`)).text();
      expect(text).toContain("ratelimit_service_global_shadow_mode 3");
    } finally {
      c.close();
      await shadowed.close();
    }
  });
});

describe("NEAR_LIMIT_RATIO", () => {
  it("0.5 of 10: hits above the 5th are near", async () => {
    const other = await serveRules(CONFIG, { nearLimitRatio: 0.5 });
    const c = rlsClient(other.grpcPort);
    try {
      for (let i = 0; i < 8; i++) await c.shouldRateLimit({ domain: "s", descriptors: [d("path=/api", "user=n")] });
      const text = await (await fetch(`http://127.0.0.1:${other.httpPort}/metrics`)).text();
      expect(text).toContain('ratelimit_service_rate_limit_near_limit{domain="s",key1="path_/api",key2="user"} 3');
      expect(text).toContain("# TYPE ratelimit_service_rate_limit_total_hits counter");
    } finally {
      c.close();
      await other.close();
    }
  });
});
