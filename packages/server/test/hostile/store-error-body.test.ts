/**
 * A store that fails (the rate-limit store, its leases, the overrides database) is answered 503
 * `unavailable` / gRPC UNAVAILABLE, and the dashboard shows that the overrides listing failed: none
 * of them may carry the store's own error text across the trust boundary (a Redis address, a
 * PostgreSQL error naming its host, user and database, a socket's path). They say what kind of
 * failure it was (unavailable, timed out, refused), which store, and an error id; the service's
 * log line has the error itself with the same `errorId`. Before, the 503 body, the gRPC details
 * and the dashboard's `overrides.error` echoed the error's message (internal-error-body.test.ts
 * is the same for 500s).
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { bindGrpc, createGrpcServer } from "../../src/transport/grpc.js";
import { DashboardStats } from "../../src/dashboard/stats.js";
import { StateBuilder } from "../../src/dashboard/state.js";
import { rlsClient } from "../support.js";
import { captureLog, failingOverrides, failingStore, idIn, serveHttp, TOKEN } from "./failing-parts.js";
import type { OverrideStore } from "../../src/overrides/types.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
policies:
  p: { algorithm: fixed-window, limit: 5, window: 1m }
concurrency:
  reports: { limit: 1, lease: 1h }
`;
/** What no answer may hold: the hosts, ports, users, databases and paths the errors below name. */
const SECRETS = ["10.0.0.5", "6379", "redis-internal", "/srv/secret", "rk.sock", "rk_admin", "db-internal", "tenants_prod", "hunter2"];

/** Errors as the clients make them: Node's connect error (with its code), a path's, a driver's timeout. */
const storeErrors: Record<string, () => Error> = {
  refused: () =>
    Object.assign(new Error("connect ECONNREFUSED 10.0.0.5:6379 (redis-internal.corp)"), {
      code: "ECONNREFUSED",
      address: "10.0.0.5",
      port: 6379,
    }),
  path: () => Object.assign(new Error("connect ENOENT /srv/secret/rk.sock"), { code: "ENOENT" }),
  plain: () => new Error("redis://:hunter2@redis-internal.corp:6379 went away"),
};

/** A PostgreSQL error as pg makes it: SQLSTATE code, severity, and a message naming user, host, database. */
const pgError = () =>
  Object.assign(new Error('password authentication failed for user "rk_admin" at db-internal.corp database "tenants_prod"'), {
    code: "28P01",
    severity: "FATAL",
  });

/** `text` holds none of {@link SECRETS}, gives an error id, and the log line of that id has the error. */
function checkAnswer(what: string, text: string, lines: Record<string, unknown>[], msg: string): void {
  for (const s of SECRETS) expect(text, `${what}: ${text}`).not.toContain(s);
  const id = idIn(text);
  expect(id, `${what}: ${text}`).toBeDefined();
  const logged = lines.filter((l) => l.msg === msg && l.errorId === id);
  expect(logged, `${what}: a "${msg}" line with errorId ${id}`).toHaveLength(1);
  expect(JSON.stringify(logged[0]?.err), what).toMatch(/10\.0\.0\.5|\/srv\/secret|hunter2|rk_admin/);
}

let close: (() => void) | undefined;
afterEach(() => close?.());

async function serve(service: DecisionService, logger: pino.Logger, overridesStore?: OverrideStore): Promise<string> {
  const s = await serveHttp(service, { logger, overridesStore });
  close = s.close;
  return s.url;
}

async function call(url: string, body: unknown, method = "POST"): Promise<{ status: number; text: string; body: { error: string } }> {
  const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${TOKEN}` };
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as { error: string } };
}

const check = { domain: "d", descriptors: [{ k: "1" }] };

describe("a store's failure: no store error text across the trust boundary", () => {
  for (const [name, error] of Object.entries(storeErrors)) {
    it(`HTTP 503 bodies (${name}): the kind of failure and an error id, the error in the log`, async () => {
      const { lines, logger } = captureLog();
      const service = new DecisionService({ store: failingStore(error), rules: parseRules(RULES, "r.yaml") });
      const url = await serve(service, logger);
      const answers = {
        check: await call(`${url}/v1/check`, check),
        batch: await call(`${url}/v1/check`, { checks: [check] }),
        plain: await call(`${url}/v1/check`, { key: "u", policy: "p" }),
        peek: await call(`${url}/v1/keys/d/k=1`, undefined, "GET"),
        acquire: await call(`${url}/v1/leases/acquire`, { pool: "reports", key: "t" }),
        release: await call(`${url}/v1/leases/release`, { pool: "reports", key: "t", id: "abcdefghijkl.abcdefgh" }),
        reset: await call(`${url}/v1/admin/keys/d/k=1/reset`, undefined),
      };
      for (const [route, r] of Object.entries(answers)) {
        expect([r.status, r.body.error], `${route}: ${r.text}`).toEqual([503, "unavailable"]);
        expect(r.text, route).toMatch(/the store failed/);
        checkAnswer(route, r.text, lines, route === "reset" ? "admin request failed" : "request failed");
      }
      if (name === "refused") for (const r of Object.values(answers)) expect(r.text).toMatch(/unavailable \(ECONNREFUSED/);
    });
  }

  it("gRPC UNAVAILABLE details: the kind of failure and an error id, the error in the log", async () => {
    for (const error of Object.values(storeErrors)) {
      const { lines, logger } = captureLog();
      const service = new DecisionService({ store: failingStore(error), rules: parseRules(RULES, "r.yaml") });
      const server = createGrpcServer({ service, logger });
      const client = rlsClient(await bindGrpc(server, "127.0.0.1", 0));
      try {
        const e = await client.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "k", value: "1" }] }] }).then(
          () => undefined,
          (x: unknown) => x as { code: number; details: string },
        );
        expect(e?.code).toBe(14); // UNAVAILABLE
        expect(e?.details).toMatch(/^the store failed/);
        checkAnswer("gRPC", e?.details ?? "", lines, "ShouldRateLimit failed");
      } finally {
        client.close();
        server.forceShutdown();
      }
    }
  });

  it("the overrides database (PostgreSQL naming host, user, database): admin 503 bodies", async () => {
    const { lines, logger } = captureLog();
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml") });
    const url = await serve(service, logger, failingOverrides(pgError, "postgres", "postgres://rk_admin@db-internal.corp/tenants_prod"));
    const answers = {
      list: await call(`${url}/v1/admin/overrides`, undefined, "GET"),
      get: await call(`${url}/v1/admin/overrides/d/k=1`, undefined, "GET"),
      block: await call(`${url}/v1/admin/keys/d/k=1/block`, { ttl: "1h" }),
    };
    for (const [route, r] of Object.entries(answers)) {
      expect([r.status, r.body.error], `${route}: ${r.text}`).toEqual([503, "unavailable"]);
      expect(r.text, route).toMatch(/the overrides database failed: PostgreSQL refused the call \(SQLSTATE 28P01\)/);
      checkAnswer(route, r.text, lines, "admin request failed");
    }
  });

  it("the dashboard's overrides error: the kind of failure and an error id, the error in the log", async () => {
    const { lines, logger } = captureLog();
    const builder = new StateBuilder({
      stats: new DashboardStats(),
      rules: () => parseRules(RULES, "r.yaml"),
      overrides: failingOverrides(pgError, "postgres", "postgres://rk_admin@db-internal.corp/tenants_prod"),
      storeHealth: () => ({ kind: "memory", status: "ready", breaker: null }),
      logger,
    });
    const state = await builder.build();
    expect(state.overrides.enabled).toBe(true);
    const text = state.overrides.error ?? "";
    expect(text).toMatch(/^the overrides database failed: PostgreSQL refused the call \(SQLSTATE 28P01\)/);
    checkAnswer("dashboard", text, lines, "dashboard: the overrides listing failed");
  });
});
