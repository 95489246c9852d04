/**
 * The service with the Redis store: state shared by instances; two instances behind nginx as a
 * load balancer (examples/nginx/load-balancer.conf) admit exactly the limit under a burst;
 * Redis failures follow --redis-failure.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { INSTALL, findBinary } from "../../../test-support/outside.js";
import { freePort, until } from "../../../test-support/process.js";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import {
  adaptNginxConf,
  example,
  getJson,
  postJson,
  rlsClient,
  startNginx,
  startServiceProcess,
  type NginxProc,
  type ServiceProc,
} from "./support.js";

const RULES = `
domains:
  - domain: lb
    descriptors:
      - key: tenant
        algorithm: sliding-log
        limit: 50
        window: 1h
      - key: grpc_tenant
        algorithm: gcra
        limit: 30
        window: 1h
        burst: 29
      - key: user
        algorithm: fixed-window
        limit: 5
        window: 1h
`;

// The load-balancer cases also need nginx: without it they skip (one loud line), the rest run.
const nginxBin = findBinary("nginx", "nginx", INSTALL.nginx);

describeRedis("decision service with the Redis store", () => {
  let redis: RedisHandle;
  let dir: string;
  let a: ServiceProc;
  let b: ServiceProc;
  let nginx: NginxProc;
  let grpcLbPort: number;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(path.join(tmpdir(), "rk-redis-"));
    const rules = path.join(dir, "rules.yaml");
    writeFileSync(rules, RULES);
    // A generous Redis timeout: under a burst on two shared cores the default 50 ms could let the
    // failure policy (open) decide, and this test is about exactness.
    const args = ["--config", rules, "--redis", redis.url, "--redis-timeout", "2000", "--no-watch"];
    [a, b] = await Promise.all([startServiceProcess(args), startServiceProcess(args)]);
    const port = await freePort();
    grpcLbPort = await freePort();
    const conf = adaptNginxConf(example("examples/nginx/load-balancer.conf"), {
      8100: port,
      8101: grpcLbPort,
      8080: a.httpPort,
      8081: a.grpcPort,
      8090: b.httpPort,
      8091: b.grpcPort,
    });
    if (nginxBin) nginx = await startNginx(conf, port, nginxBin);
  });

  afterAll(async () => {
    await nginx?.stop();
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("shares state between instances: one charges, the other sees it", async () => {
    const r1 = await postJson(`${a.base}/v1/check`, { domain: "lb", descriptors: [{ user: "u1" }] });
    const r2 = await postJson(`${b.base}/v1/check`, { domain: "lb", descriptors: [{ user: "u1" }] });
    expect(r1.json.statuses[0].remaining).toBe(4);
    expect(r2.json.statuses[0].remaining).toBe(3);
    const peek = await getJson(`${a.base}/v1/keys/lb/user=u1`);
    expect(peek.statuses[0]).toMatchObject({ allowed: true, limit: 5 });
    expect((await fetch(`${b.base}/readyz`)).status).toBe(200);
  });

  it.skipIf(!nginxBin)("two instances behind nginx: a burst from many clients at one descriptor admits exactly the limit", async () => {
    const clients = 25;
    const perClient = 8; // 200 checks for a limit of 50
    const lb = `http://127.0.0.1:${nginx.port}/v1/check`;
    const allowed = await Promise.all(
      Array.from({ length: clients }, async () => {
        let n = 0;
        for (let i = 0; i < perClient; i++) {
          const r = await postJson(lb, { domain: "lb", descriptors: [{ tenant: "acme" }] });
          expect([r.status, r.json]).toEqual([200, expect.anything()]);
          if (r.json.allowed) n++;
        }
        return n;
      }),
    );
    expect(allowed.reduce((x, y) => x + y, 0)).toBe(50);
    // Both instances took part.
    for (const s of [a, b]) {
      const m = await (await fetch(`${s.base}/metrics`)).text();
      const ok = Number(/ratekeeper_decisions_total\{domain="lb",rule="lb\/tenant",outcome="ok"\} (\d+)/.exec(m)?.[1] ?? 0);
      const over = Number(/ratekeeper_decisions_total\{domain="lb",rule="lb\/tenant",outcome="over_limit"\} (\d+)/.exec(m)?.[1] ?? 0);
      expect(ok + over).toBeGreaterThan(0);
    }
  });

  it.skipIf(!nginxBin)("the same over gRPC (Envoy RLS) through nginx's grpc_pass: exactly the limit", async () => {
    const clients = Array.from({ length: 10 }, () => rlsClient(grpcLbPort));
    try {
      const ok = await Promise.all(
        clients.map(async (c) => {
          let n = 0;
          for (let i = 0; i < 10; i++) {
            const r = await c.shouldRateLimit({ domain: "lb", descriptors: [{ entries: [{ key: "grpc_tenant", value: "acme" }] }] });
            if (r.overall_code === "OK") n++;
          }
          return n;
        }),
      );
      expect(ok.reduce((x, y) => x + y, 0)).toBe(30);
    } finally {
      for (const c of clients) c.close();
    }
  });
});

describeRedis("decision service when Redis fails", () => {
  let redis: RedisHandle;
  let dir: string;
  let closed: ServiceProc;
  let thrower: ServiceProc;
  let dflt: ServiceProc;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(path.join(tmpdir(), "rk-redis-fail-"));
    const rules = path.join(dir, "rules.yaml");
    writeFileSync(rules, RULES);
    const args = ["--config", rules, "--redis", redis.url, "--no-watch"];
    [closed, thrower, dflt] = await Promise.all([
      startServiceProcess([...args, "--redis-failure", "closed"]),
      startServiceProcess([...args, "--redis-failure", "throw"]),
      startServiceProcess(args),
    ]);
  });

  afterAll(async () => {
    redis?.resume();
    await Promise.all([closed?.stop(), thrower?.stop(), dflt?.stop()]);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Polls /readyz until it answers `status`; resolves how long that took (ms). */
  async function readyzBecomes(s: ServiceProc, status: number): Promise<number> {
    const t0 = Date.now();
    for (;;) {
      if ((await fetch(`${s.base}/readyz`)).status === status) return Date.now() - t0;
      if (Date.now() - t0 > 15_000) throw new Error(`/readyz never answered ${status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("a frozen Redis (SIGSTOP) with no traffic: /readyz says not ready within about 2 s, ready again after SIGCONT", async () => {
    for (const s of [closed, thrower, dflt]) expect((await fetch(`${s.base}/readyz`)).status).toBe(200);
    redis.pause();
    const waited = await Promise.all([closed, thrower, dflt].map((s) => readyzBecomes(s, 503)));
    // A ping every 500 ms, the 1 s timeout, the watchdog's quarter-timeout step; slack for a loaded machine.
    for (const ms of waited) expect(ms).toBeLessThan(3_000);
    const m = await (await fetch(`${dflt.base}/metrics`)).text();
    expect(m).toMatch(/ratekeeper_redis_breaker_state [12]/); // open, or half-open while a probe is out
    redis.resume();
    for (const s of [closed, thrower, dflt]) await readyzBecomes(s, 200);
  });

  it("Redis stopped: each policy answers (closed denies, throw is 503, degraded limits locally); not ready; all recover", async () => {
    const body = { domain: "lb", descriptors: [{ user: "f1" }] };
    expect((await postJson(`${closed.base}/v1/check`, body)).json.allowed).toBe(true);
    // Each instance counts the live ones at its heartbeat (every 5 s): wait until the default one has seen all three.
    await until(
      async () => /ratekeeper_redis_instances 3/.test(await (await fetch(`${dflt.base}/metrics`)).text()),
      "3 live instances",
      200,
      50,
    );
    await redis.stop();
    const c = await postJson(`${closed.base}/v1/check`, body);
    expect(c.status).toBe(200);
    expect(c.json.statuses[0]).toMatchObject({ allowed: false, reason: "store-error" });
    const t = await postJson(`${thrower.base}/v1/check`, body);
    expect(t.status).toBe(503);
    // The default, degraded: this instance limits alone at its share (5 per hour / 3 live instances = 1).
    const d1 = await postJson(`${dflt.base}/v1/check`, { domain: "lb", descriptors: [{ user: "f2" }] });
    const d2 = await postJson(`${dflt.base}/v1/check`, { domain: "lb", descriptors: [{ user: "f2" }] });
    expect(d1.json.statuses[0]).toMatchObject({ allowed: true, reason: "degraded", limit: 1 });
    expect(d2.json.statuses[0]).toMatchObject({ allowed: false, reason: "degraded" });
    // Not ready: at once where a few failed calls in a row have opened the breaker, else once the
    // pings (every 500 ms) have (ERRORS_TO_OPEN errors, or a timeout); an instance that answered
    // one check may still be closed here. Same bound as the frozen case above.
    const waited = await Promise.all([closed, thrower, dflt].map((s) => readyzBecomes(s, 503)));
    for (const ms of waited) expect(ms).toBeLessThan(3_000);
    for (const s of [closed, thrower, dflt]) {
      const ready = await fetch(`${s.base}/readyz`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { reason: string }).reason).toMatch(/redis is down/);
    }
    const m = await (await fetch(`${dflt.base}/metrics`)).text();
    expect(m).toMatch(/ratekeeper_decision_reasons_total\{reason="degraded"\} [1-9]/);
    await redis.restart();
    for (const s of [closed, thrower, dflt]) await readyzBecomes(s, 200);
    // The degraded instance charged Redis with what it admitted alone: user f2 holds 1 of 5.
    const after = await postJson(`${dflt.base}/v1/check`, { domain: "lb", descriptors: [{ user: "f2" }] });
    expect(after.json.statuses[0]).toMatchObject({ allowed: true, remaining: 3 });
  });
});
