/**
 * The decision service as a process (memory store), over HTTP and Envoy's RLS gRPC API.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { CLI, ROOT, getJson, postJson, rlsClient, startServiceProcess, type RlsClient, type ServiceProc } from "./support.js";

const RULES = `
policies:
  login: { algorithm: sliding-log, limit: 2, window: 1h }
domains:
  - domain: t
    descriptors:
      - key: user
        algorithm: sliding-log
        limit: 3
        window: 1h
      - key: tenant
        value: big
        limits:
          - { algorithm: sliding-log, limit: 100, window: 1h, name: hourly }
          - { algorithm: fixed-window, limit: 1000, window: 1d, name: daily }
      - key: shadowed
        algorithm: sliding-log
        limit: 1
        window: 1h
        shadow: true
      - key: free
        unlimited: true
      - key: ip
        descriptors:
          - key: path
            value: /search*
            algorithm: sliding-log
            limit: 2
            window: 1h
            cost: 2
      - key: minute
        rate_limit: { unit: minute, requests_per_unit: 5 }
`;

let dir: string;
let rulesFile: string;
let svc: ServiceProc;
let rls: RlsClient;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "rk-svc-"));
  rulesFile = path.join(dir, "rules.yaml");
  writeFileSync(rulesFile, RULES);
  svc = await startServiceProcess(["--config", rulesFile, "--request-timeout", "1000"]);
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const check = (body: unknown) => postJson(`${svc.base}/v1/check`, body);

describe("POST /v1/check", () => {
  it("admits up to the limit, then denies with the middleware's headers, Retry-After and an explain", async () => {
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await check({ domain: "t", descriptors: [{ user: "alice" }] }));
    expect(results.map((r) => r.json.allowed)).toEqual([true, true, true, false]);
    expect(results.every((r) => r.status === 200)).toBe(true);
    const first = results[0]!;
    expect(first.headers.get("ratelimit-policy")).toBe('"3-per-1h";q=3;w=3600');
    expect(first.headers.get("ratelimit")).toMatch(/^"3-per-1h";r=2;t=\d+$/);
    expect(first.json.statuses[0]).toMatchObject({ key: "user=alice", limit: 3, remaining: 2, windowMs: 3_600_000, policy: "3-per-1h" });
    expect(first.json.statuses[0].explain).toMatchObject({ rule: "t/user", source: "rule" });
    expect(first.json.statuses[0].explain.why).toContain("sliding-log 3 per 3600000 ms");
    const denied = results[3]!;
    expect(Number(denied.headers.get("retry-after"))).toBeGreaterThan(3500);
    expect(denied.json.statuses[0]).toMatchObject({ allowed: false, overLimit: true, reason: "limit", remaining: 0 });
    expect(denied.json.statuses[0].explain.why).toContain("denied");
  });

  it("takes Envoy-shaped descriptors ([{key, value}]) and several limits (the most restrictive reports)", async () => {
    const r = await check({ domain: "t", descriptors: [[{ key: "tenant", value: "big" }]], cost: 10 });
    expect(r.json.allowed).toBe(true);
    expect(r.json.statuses[0]).toMatchObject({ limit: 100, remaining: 90, policy: "hourly" });
    expect(r.headers.get("ratelimit-policy")).toBe('"hourly";q=100;w=3600, "daily";q=1000;w=86400');
  });

  it("decides every descriptor: allowed only when all allow; unlimited and unmatched descriptors never limit", async () => {
    const r = await check({ domain: "t", descriptors: [{ free: "x" }, { nothing: "here" }, { user: "bob" }] });
    expect(r.json.allowed).toBe(true);
    expect(r.json.statuses.map((s: { unlimited: boolean }) => s.unlimited)).toEqual([true, true, false]);
    expect(r.json.statuses[1].explain).toMatchObject({ rule: null, source: "none" });
    expect(r.json.statuses[1].explain.why).toContain("no descriptor for nothing=here");
  });

  it("matches nested descriptors with wildcard values and applies the rule's cost", async () => {
    const a = await check({ domain: "t", descriptors: [{ ip: "1.1.1.1", path: "/search/cats" }] });
    expect(a.json.statuses[0]).toMatchObject({ key: "ip=1.1.1.1|path=/search/cats", remaining: 0, allowed: true });
    expect(a.json.statuses[0].explain.rule).toBe("t/ip/path=/search*");
    const b = await check({ domain: "t", descriptors: [{ ip: "1.1.1.1", path: "/search/dogs" }] });
    expect(b.json.allowed).toBe(true); // another key: another path value
    const c = await check({ domain: "t", descriptors: [{ ip: "1.1.1.1", path: "/search/cats" }] });
    expect(c.json.allowed).toBe(false);
    // The ip node has no policy of its own; another path matches nothing.
    const d = await check({ domain: "t", descriptors: [{ ip: "1.1.1.1", path: "/home" }] });
    expect(d.json.statuses[0].unlimited).toBe(true);
    const e = await check({ domain: "t", descriptors: [{ ip: "1.1.1.1" }] });
    expect(e.json.statuses[0].explain.why).toContain("no policy of its own");
  });

  it("shadow mode: counts a would-be denial but allows, and metrics say shadow_over_limit", async () => {
    const a = await check({ domain: "t", descriptors: [{ shadowed: "k" }] });
    const b = await check({ domain: "t", descriptors: [{ shadowed: "k" }] });
    expect(a.json.allowed).toBe(true);
    expect(b.json.allowed).toBe(true);
    expect(b.json.statuses[0]).toMatchObject({ shadow: true, overLimit: true, allowed: true });
    expect(b.headers.get("retry-after")).toBeNull();
    const metrics = await (await fetch(`${svc.base}/metrics`)).text();
    expect(metrics).toContain('ratekeeper_decisions_total{domain="t",rule="t/shadowed",outcome="shadow_over_limit"} 1');
    expect(metrics).toContain('ratekeeper_decisions_total{domain="t",rule="t/shadowed",outcome="ok"} 1');
    expect(metrics).toMatch(/ratekeeper_store_latency_seconds_count \d+/);
  });

  it("plain key + named policy, and batches with per-item errors", async () => {
    const r = await check({
      checks: [
        { key: "u1", policy: "login" },
        { key: "u1", policy: "login" },
        { key: "u1", policy: "login" },
        { key: "u1", policy: "nope" },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.json.results.slice(0, 3).map((x: { allowed: boolean }) => x.allowed)).toEqual([true, true, false]);
    expect(r.json.results[0]).toMatchObject({
      domain: "login",
      statuses: [{ key: "u1", explain: { rule: "policy:login", source: "policy" } }],
    });
    expect(r.json.results[3]).toMatchObject({
      error: "bad_request",
      message: expect.stringMatching(/no policy named "nope" \(known: login\)/),
    });
  });

  it("peeks without charging: GET /v1/keys/<domain>/<descriptor key>", async () => {
    await check({ domain: "t", descriptors: [{ user: "carol" }] });
    const p1 = await getJson(`${svc.base}/v1/keys/t/user=carol`);
    const p2 = await getJson(`${svc.base}/v1/keys/t/user=carol`);
    expect(p1.statuses[0].remaining).toBe(p2.statuses[0].remaining);
    expect(p1.statuses[0]).toMatchObject({ key: "user=carol", limit: 3, allowed: true });
    const plain = await getJson(`${svc.base}/v1/keys/login/u1?policy=login`);
    expect(plain.statuses[0].allowed).toBe(false);
  });

  it.each([
    ["not JSON", "{nope", /body: not valid JSON/],
    ["not an object", "42", /body: must be a JSON object/],
    ["an unknown field", { domain: "t", descriptors: [{ user: "x" }], colour: 1 }, /colour: unknown field/],
    ["no domain", { descriptors: [{ user: "x" }] }, /domain: required/],
    ["empty descriptors", { domain: "t", descriptors: [] }, /descriptors: must be a non-empty list/],
    ["an empty value", { domain: "t", descriptors: [{ user: "" }] }, /descriptors\[0\]\.user: must be a non-empty string/],
    ["a bad cost", { domain: "t", descriptors: [{ user: "x" }], cost: 1.5 }, /cost: must be a whole number/],
    [
      "a cost no rule could admit",
      { domain: "t", descriptors: [{ user: "x" }], cost: 4 },
      /cost: 4 is more than rule t\/user could ever admit \(at most 3\)/,
    ],
    ["a key without a policy", { key: "k" }, /policy: a plain key needs/],
  ])("answers 400 with the reason for %s", async (_what, body, message) => {
    const r = await check(body);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe("bad_request");
    expect(r.json.message).toMatch(message);
  });

  it("answers 413 for a body over the limit, 405 and 404 for wrong methods and paths", async () => {
    const big = JSON.stringify({ domain: "t", descriptors: [{ user: "x".repeat(70_000) }] });
    const r = await fetch(`${svc.base}/v1/check`, { method: "POST", body: big });
    expect(r.status).toBe(413);
    expect(await r.json()).toEqual({ error: "payload_too_large", message: expect.stringMatching(/at most 65536 bytes/) });
    expect((await fetch(`${svc.base}/v1/check`)).status).toBe(405);
    expect((await fetch(`${svc.base}/nope`)).status).toBe(404);
    expect((await fetch(`${svc.base}/v1/admin/overrides`)).status).toBe(404);
  });

  it("times out a client that never finishes its request (408, connection closed)", async () => {
    const sock = net.connect(svc.httpPort, "127.0.0.1");
    let received = "";
    sock.on("data", (c: Buffer) => (received += c.toString()));
    sock.write('POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"dom');
    await new Promise<void>((resolve) => sock.once("close", () => resolve()));
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });
});

describe("/v1/auth (nginx auth_request)", () => {
  it("answers 204 with headers while allowed, then 429 (or deny_status) with Retry-After", async () => {
    const url = `${svc.base}/v1/auth?domain=t`;
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await fetch(url, { headers: { "x-ratelimit-descriptor": "user=dave" } })).status);
    const denied = await fetch(url, { headers: { "x-ratelimit-descriptor": "user=dave" } });
    const forbidden = await fetch(`${url}&deny_status=403&d=${encodeURIComponent("user=dave")}`);
    expect(codes).toEqual([204, 204, 204]);
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(denied.headers.get("ratelimit-policy")).toBe('"3-per-1h";q=3;w=3600');
    expect(forbidden.status).toBe(403);
    const bad = await fetch(`${svc.base}/v1/auth?domain=t`);
    expect(bad.status).toBe(400);
  });
});

describe("operations", () => {
  it("/healthz, /readyz and /v1/rules", async () => {
    expect(await getJson(`${svc.base}/healthz`)).toEqual({ status: "ok" });
    expect(await getJson(`${svc.base}/readyz`)).toEqual({ status: "ready" });
    const rules = await getJson(`${svc.base}/v1/rules`);
    expect(rules.rules.map((r: { id: string }) => r.id)).toContain("t/ip/path=/search*");
  });

  it("config check: exit 0 on good rules, 1 with file + path errors on bad ones", () => {
    const good = spawnSync(process.execPath, [CLI, "config", "check", path.join(ROOT, "examples/rules.yaml")], { encoding: "utf8" });
    expect(good.status).toBe(0);
    const bad = path.join(dir, "bad.yaml");
    writeFileSync(
      bad,
      "domains:\n  - domain: a\n    descriptors:\n      - key: k\n        algorithm: gcra\n        limit: 0\n        window: 1s\n",
    );
    const r = spawnSync(process.execPath, [CLI, "config", "check", bad], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${bad}:6:9: domains[0].descriptors[0].limit: must be a positive whole number (got 0)`);
  });
});

describe("Envoy RLS gRPC: ShouldRateLimit", () => {
  it("answers per descriptor with current_limit, limit_remaining, duration_until_reset and headers", async () => {
    const r = await rls.shouldRateLimit({
      domain: "t",
      descriptors: [{ entries: [{ key: "minute", value: "m1" }] }, { entries: [{ key: "free", value: "x" }] }],
    });
    expect(r.overall_code).toBe("OK");
    expect(r.statuses).toHaveLength(2);
    expect(r.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: { requests_per_unit: 5, unit: "MINUTE", name: "" }, // a rate_limit block without a name, as envoyproxy/ratelimit
      limit_remaining: 4,
    });
    expect(Number(r.statuses[0].duration_until_reset.seconds)).toBeLessThanOrEqual(60);
    // An unlimited rule: 4294967295 remaining (MaxUint32), as envoyproxy/ratelimit answers.
    expect(r.statuses[1]).toMatchObject({ code: "OK", current_limit: null, limit_remaining: 4_294_967_295 });
    expect(r.response_headers_to_add).toContainEqual(expect.objectContaining({ key: "ratelimit-policy", value: '"5-per-1m";q=5;w=60' }));
  });

  it("uses hits_addend as the cost and answers OVER_LIMIT when any descriptor is over", async () => {
    const a = await rls.shouldRateLimit({ domain: "t", descriptors: [{ entries: [{ key: "user", value: "erin" }] }], hits_addend: 3 });
    expect(a.overall_code).toBe("OK");
    expect(a.statuses[0].limit_remaining).toBe(0);
    const b = await rls.shouldRateLimit({
      domain: "t",
      descriptors: [{ entries: [{ key: "free", value: "y" }] }, { entries: [{ key: "user", value: "erin" }] }],
    });
    expect(b.overall_code).toBe("OVER_LIMIT");
    expect(b.statuses.map((s: { code: string }) => s.code)).toEqual(["OK", "OVER_LIMIT"]);
    expect(Number(b.statuses[1].duration_until_reset.seconds)).toBeGreaterThan(3500);
    expect(b.response_headers_to_add).toContainEqual(expect.objectContaining({ key: "retry-after" }));
  });

  it("a descriptor's own limit (Envoy route config) replaces the rules for it", async () => {
    const req = { domain: "t", descriptors: [{ entries: [{ key: "nope", value: "x" }], limit: { requests_per_unit: 2, unit: "HOUR" } }] };
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await rls.shouldRateLimit(req)).overall_code);
    expect(codes).toEqual(["OK", "OK", "OVER_LIMIT"]);
    const r = await rls.shouldRateLimit(req);
    expect(r.statuses[0].current_limit).toMatchObject({ requests_per_unit: 2, unit: "HOUR" });
  });

  it("an unknown domain is not limited; a bad descriptor is INVALID_ARGUMENT", async () => {
    const r = await rls.shouldRateLimit({ domain: "nope", descriptors: [{ entries: [{ key: "a", value: "b" }] }] });
    expect(r.overall_code).toBe("OK");
    await expect(rls.shouldRateLimit({ domain: "t", descriptors: [{ entries: [{ key: "", value: "x" }] }] })).rejects.toMatchObject({
      code: 3,
    });
  });
});

describe("hot reload", () => {
  it("applies a good change and keeps the last good rules on a bad one (logged and counted)", async () => {
    writeFileSync(rulesFile, RULES.replace("limit: 3\n", "limit: 7\n"));
    await until(
      async () => (await check({ domain: "t", descriptors: [{ user: "reload1" }] })).json.statuses[0].limit === 7,
      "the new limit",
    );
    // The log line travels through a pipe: wait for it rather than race it.
    await until(() => svc.lines.some((l) => l.includes('"msg":"rules reloaded"')), "the reload to be logged");

    writeFileSync(rulesFile, RULES.replace("limit: 3\n", "limit: -1\n"));
    await until(() => svc.lines.some((l) => l.includes("rules reload failed")), "the failed reload to be logged");
    const failed = svc.lines.find((l) => l.includes("rules reload failed"))!;
    expect(failed).toContain("domains[0].descriptors[0].limit: must be a positive whole number (got -1)");
    const r = await check({ domain: "t", descriptors: [{ user: "reload2" }] });
    expect(r.json.statuses[0].limit).toBe(7);
    const metrics = await (await fetch(`${svc.base}/metrics`)).text();
    expect(metrics).toContain('ratekeeper_config_reloads_total{result="failed"} 1');
    expect(metrics).toContain('ratekeeper_config_reloads_total{result="ok"} 1');
    expect(metrics).toContain("ratekeeper_config_last_reload_success 0");
  });
});

describe("process lifecycle", () => {
  it("refuses to start on bad rules, naming file and path", () => {
    const bad = path.join(dir, "bad2.yaml");
    writeFileSync(
      bad,
      "domains:\n  - domain: a\n    descriptors:\n      - key: k\n        algorithm: nope\n        limit: 1\n        window: 1s\n",
    );
    const r = spawnSync(process.execPath, [CLI, "serve", "--config", bad, "--port", "0", "--grpc-port", "0"], { encoding: "utf8" });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`${bad}:5:9: domains[0].descriptors[0].algorithm: must be one of`);
  });

  it("shuts down gracefully on SIGTERM: finishes the request in flight, then exits 0", async () => {
    const good = path.join(dir, "good.yaml");
    writeFileSync(good, RULES);
    const other = await startServiceProcess(["--config", good]);
    const body = JSON.stringify({ domain: "t", descriptors: [{ user: "inflight" }] });
    const sock = net.connect(other.httpPort, "127.0.0.1");
    let received = "";
    sock.on("data", (c: Buffer) => (received += c.toString()));
    const closed = new Promise<void>((resolve) => sock.once("close", () => resolve()));
    sock.write(`POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
    // A round trip on another connection: the server has read the first request's headers by now.
    expect((await fetch(`${other.base}/healthz`)).status).toBe(200);
    const exit = other.stop();
    await until(() => other.lines.some((l) => l.includes('"msg":"shutting down"')), "shutdown to begin");
    sock.write(body.slice(10));
    await until(() => received.includes("}]}"), "the in-flight response");
    expect(received).toMatch(/^HTTP\/1\.1 200/);
    expect(received).toContain('"allowed":true');
    sock.end();
    await closed;
    expect(await exit).toBe(0);
    expect(other.lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
  });
});
