/**
 * /dashboard on the service's HTTP port: the JSON for scripts (rules, live counts per rule, top
 * denied keys, store health), the Server-Sent Events stream, the admin token (Bearer or Basic),
 * the static page with its content security policy, and what the counters count.
 */
import http from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../src/log.js";
import { COUNT_ALL_BELOW_PER_SECOND, DashboardStats, SAMPLE_EVERY } from "../src/dashboard/stats.js";
import { MAX_EVENT_CLIENTS } from "../src/dashboard/routes.js";
import { startService, type RunningService } from "../src/server.js";
import { until } from "../../../test-support/process.js";
import { serveRules } from "./in-process.js";

const RULES = `
policies:
  login: { algorithm: sliding-log, limit: 2, window: 1h }
domains:
  - domain: shop
    descriptors:
      - key: user
        algorithm: fixed-window
        limit: 3
        window: 1h
      - key: plan
        value: free
        algorithm: sliding-log
        limit: 1
        window: 1h
        shadow: true
`;

const TOKEN = "s3cret-token-0123456789";
let dir: string;
let open: RunningService;
let locked: RunningService;
let base: string;

async function check(b: string, user: string) {
  const r = await fetch(`${b}/v1/check`, {
    method: "POST",
    body: JSON.stringify({ domain: "shop", descriptors: [[{ key: "user", value: user }]] }),
  });
  return (await r.json()) as { allowed: boolean };
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-dash-"));
  const rules = path.join(dir, "rules.yaml");
  writeFileSync(rules, RULES);
  const common = { configFile: rules, port: 0, grpcPort: 0, host: "127.0.0.1", watch: false, logger: createLogger("silent") };
  open = await startService(common);
  locked = await startService({ ...common, adminToken: TOKEN });
  base = `http://127.0.0.1:${open.httpPort}`;
});

afterAll(async () => {
  await Promise.all([open?.close(), locked?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe("dashboard JSON", () => {
  it("lists the domains and rules in file order, the named policies, and counts each rule's decisions", async () => {
    for (let i = 0; i < 5; i++) await check(base, "mallory"); // 3 allowed, 2 denied
    await check(base, "alice");
    await fetch(`${base}/v1/check`, {
      method: "POST",
      body: JSON.stringify({ domain: "shop", descriptors: [[{ key: "plan", value: "free" }]] }),
    });
    await fetch(`${base}/v1/check`, {
      method: "POST",
      body: JSON.stringify({ domain: "shop", descriptors: [[{ key: "plan", value: "free" }]] }),
    });
    await fetch(`${base}/v1/check`, {
      method: "POST",
      body: JSON.stringify({ domain: "shop", descriptors: [[{ key: "nobody", value: "x" }]] }),
    });
    const s: any = await (await fetch(`${base}/dashboard/api/state`)).json();
    expect(s.version).toBe(1);
    expect(s.rulesSource).toMatch(/rules\.yaml$/);
    const shop = s.domains.find((d: any) => d.domain === "shop");
    expect(shop.rules.map((r: any) => [r.id, r.limits, r.shadow, r.configured])).toEqual([
      ["shop/user", "fixed-window 3 per 1h", false, true],
      ["shop/plan=free", "sliding-log 1 per 1h", true, true],
      ["", null, false, false], // the check no rule matched
    ]);
    const user = shop.rules[0];
    expect([user.allowed, user.denied]).toEqual([4, 2]);
    expect(shop.rules[1]).toMatchObject({ allowed: 2, denied: 0, shadowDenied: 1 });
    expect(shop.rules[2]).toMatchObject({ allowed: 1, denied: 0 });
    expect(s.domains.find((d: any) => d.domain === "(policy)").rules[0]).toMatchObject({
      id: "policy:login",
      limits: "sliding-log 2 per 1h",
    });
    expect(s.topDenied.keys[0]).toEqual({ domain: "shop", key: "user=mallory", rule: "shop/user", denials: 2, error: 0 });
    expect(s.store).toMatchObject({ kind: "memory", status: "ready", breaker: null, errors: 0, failurePolicyDecisions: 0 });
    expect(s.store.latencyMs.samples).toBeGreaterThanOrEqual(8);
    expect(s.overrides).toEqual({ enabled: false, items: [], more: false, error: null });
    expect(s.totals.allowed + s.totals.denied).toBe(9);
  });

  it("streams the same JSON as Server-Sent Events, about once a second, with the numbers moving", async () => {
    const events: any[] = [];
    const req = http.get(`${base}/dashboard/api/events`);
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once("response", resolve));
    expect(res.headers["content-type"]).toBe("text/event-stream");
    let buf = "";
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buf += chunk;
      let end: number;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = frame.split("\n").find((l) => l.startsWith("data: "));
        if (frame.includes("event: state") && data) events.push(JSON.parse(data.slice(6)));
      }
    });
    await until(() => events.length >= 1, "the first event");
    const before = events[0].totals.allowed + events[0].totals.denied;
    for (let i = 0; i < 4; i++) await check(base, `sse-${i}`);
    await until(() => events.some((e) => e.totals.allowed + e.totals.denied >= before + 4), "an event with the new decisions");
    const latest = events[events.length - 1];
    expect(latest.domains.find((d: any) => d.domain === "shop").rules[0].allowedPerSecond).toHaveLength(60);
    req.destroy();
  });

  it("turns away streams past the cap, pointing to polling", async () => {
    const reqs: http.ClientRequest[] = [];
    try {
      for (let i = 0; i < MAX_EVENT_CLIENTS; i++) {
        const req = http.get(`${base}/dashboard/api/events`);
        reqs.push(req);
        await new Promise((resolve) => req.once("response", resolve));
      }
      const r = await fetch(`${base}/dashboard/api/events`);
      expect(r.status).toBe(503);
      expect(((await r.json()) as any).message).toMatch(/poll \/dashboard\/api\/state/);
    } finally {
      for (const r of reqs) r.destroy();
    }
  });

  it("serves the page, its script and style with a strict content security policy; redirects /dashboard; 404 for the rest", async () => {
    const page = await fetch(`${base}/dashboard/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/text\/html/);
    expect(page.headers.get("content-security-policy")).toMatch(/script-src 'self'/);
    expect(await page.text()).toMatch(/<script src="app\.js" defer><\/script>/);
    expect((await fetch(`${base}/dashboard/app.js`)).headers.get("content-type")).toMatch(/text\/javascript/);
    expect((await fetch(`${base}/dashboard/style.css`)).headers.get("content-type")).toMatch(/text\/css/);
    const redirect = await fetch(`${base}/dashboard`, { redirect: "manual" });
    expect([redirect.status, redirect.headers.get("location")]).toEqual([308, "/dashboard/"]);
    expect((await fetch(`${base}/dashboard/../package.json`)).status).toBe(404);
    expect((await fetch(`${base}/dashboard/nope.js`)).status).toBe(404);
    expect((await fetch(`${base}/dashboard/api/state`, { method: "POST" })).status).toBe(405);
  });
});

describe("dashboard behind the admin token", () => {
  it("asks for it (Basic, so a browser prompts) and takes it as Bearer or as the Basic password", async () => {
    const b = `http://127.0.0.1:${locked.httpPort}`;
    for (const p of ["/dashboard/", "/dashboard/api/state", "/dashboard/api/events", "/dashboard/app.js"]) {
      const r = await fetch(`${b}${p}`);
      expect(r.status, p).toBe(401);
      expect(r.headers.get("www-authenticate"), p).toMatch(/^Basic realm="ratekeeper dashboard"/);
    }
    const wrong = await fetch(`${b}/dashboard/api/state`, { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    const bearer = await fetch(`${b}/dashboard/api/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(bearer.status).toBe(200);
    const basic = `Basic ${Buffer.from(`anyone:${TOKEN}`).toString("base64")}`;
    expect((await fetch(`${b}/dashboard/`, { headers: { authorization: basic } })).status).toBe(200);
    // The decision API itself stays open: the token guards the dashboard and the admin API.
    expect((await check(b, "x")).allowed).toBe(true);
  });
});

describe("dashboard shutdown", () => {
  it("a graceful stop ends the event streams instead of waiting for them", async () => {
    // A shutdown timeout longer than the test's: if the open stream held the server, the test would time out.
    const svc = await serveRules(RULES, { dashboard: true, shutdownTimeoutMs: 600_000 });
    const req = http.get(`http://127.0.0.1:${svc.httpPort}/dashboard/api/events`);
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once("response", resolve));
    const ended = new Promise<void>((resolve) => {
      res.on("data", () => {});
      res.once("end", () => resolve());
      res.once("close", () => resolve());
    });
    await svc.close();
    await ended;
  });
});

describe("dashboard off", () => {
  it("--no-dashboard (dashboard: false): /dashboard is 404 and nothing is counted for it", async () => {
    const off = await serveRules(RULES, { dashboard: false });
    try {
      const r = await fetch(`http://127.0.0.1:${off.httpPort}/dashboard/`);
      expect(r.status).toBe(404);
      expect(((await r.json()) as any).message).toMatch(/--no-dashboard/);
    } finally {
      await off.close();
    }
  });
});

describe("DashboardStats", () => {
  it("moves the per-second history on each tick; allowed, denied and shadow land where they belong; only denials feed the sketch", () => {
    const s = new DashboardStats(0);
    s.decision("d", "r", "ok");
    s.decision("d", "r", "over_limit", "d|k1");
    s.decision("d", "r", "shadow_over_limit");
    s.decision("d", "r", "blocked", "d|k2");
    s.decision("d", "r", "over_limit", "d|k1");
    s.decision("d", "", "no_match");
    s.tick();
    s.decision("d", "r", "ok");
    s.tick();
    const [r, none] = s.rules();
    expect(r).toMatchObject({ allowed: 3, denied: 3, shadowDenied: 1 });
    expect(Array.from(r!.allowedPerSecond.slice(-2))).toEqual([2, 1]);
    expect(Array.from(r!.deniedPerSecond.slice(-2))).toEqual([3, 0]);
    expect(none).toMatchObject({ rule: "", allowed: 1 });
    expect(s.topDenied.top().map((t) => [t.item, t.count, t.payload])).toEqual([
      ["d|k1", 2, "r"],
      ["d|k2", 1, "r"],
    ]);
    expect(s.latencyMs()).toBeNull();
    for (let i = 1; i <= 100; i++) s.storeLatency(i / 1000);
    expect(s.latencyMs()).toEqual({ p50: 51, p99: 100, max: 100, samples: 100 });
  });

  it("during a flood of denials counts one in 16 with weight 16: the heavy hitter still leads, and the state says counts are estimates", () => {
    const s = new DashboardStats(0);
    for (let i = 0; i < COUNT_ALL_BELOW_PER_SECOND; i++) s.decision("d", "r", "over_limit", `d|early-${i}`);
    expect(s.sampledDenials).toBe(0);
    for (let i = 0; i < 64_000; i++) s.decision("d", "r", "over_limit", i % 4 === 0 ? "d|attacker" : `d|flood-${i}`);
    expect(s.sampledDenials).toBeGreaterThan(64_000 / SAMPLE_EVERY / 2);
    expect(s.sampledDenials).toBeLessThan((64_000 / SAMPLE_EVERY) * 2);
    const [first] = s.topDenied.top(1);
    expect(first!.item).toBe("d|attacker");
    // 16 000 denials of the attacker, estimated from about 1 000 samples.
    expect(first!.count).toBeGreaterThan(10_000);
    expect(first!.count).toBeLessThan(26_000);
    // A new second counts every denial again: each of these keys enters the sketch.
    s.tick();
    const before = s.sampledDenials;
    for (let i = 0; i < 5; i++) s.decision("d", "r", "over_limit", `d|after-${i}`);
    expect(s.sampledDenials).toBe(before);
    expect(s.topDenied.top().filter((t) => t.item.startsWith("d|after-"))).toHaveLength(5);
  });
});
