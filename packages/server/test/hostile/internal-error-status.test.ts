/**
 * An error the service did not expect (a bug: a TypeError in its own code) is not an outage of
 * the store it depends on. It is answered 500 `internal`, saying so; a store that fails (the
 * rate-limit store, its leases, the overrides database) is still 503 `unavailable`, "the store
 * failed", whatever the error it threw looks like (a TypeError too: fetch's "fetch failed").
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { createLogger } from "../../src/log.js";
import { bindGrpc, createGrpcServer } from "../../src/transport/grpc.js";
import { rlsClient } from "../support.js";
import { failingOverrides, failingStore, serveHttp, TOKEN } from "./failing-parts.js";
import type { DecisionObserver } from "../../src/service/types.js";
import type { OverrideStore } from "../../src/overrides/types.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
concurrency:
  reports: { limit: 1, lease: 1h }
`;

let close: (() => void) | undefined;
afterEach(() => close?.());

async function serve(service: DecisionService, overridesStore?: OverrideStore): Promise<string> {
  const s = await serveHttp(service, { overridesStore });
  close = s.close;
  return s.url;
}

async function post(url: string, body: unknown, admin = false): Promise<{ status: number; body: { error: string; message: string } }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (admin) headers.authorization = `Bearer ${TOKEN}`;
  const res = await fetch(url, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error: string; message: string } };
}

const check = { domain: "d", descriptors: [{ k: "1" }] };

describe("errors: a bug is 500, a failing store 503", () => {
  it("a bug in the service (an observer that throws) is 500 internal, not 'the store failed'", async () => {
    const observer = {
      decision: () => {
        throw new TypeError("Cannot read properties of undefined (reading 'count')");
      },
      storeLatency: () => undefined,
      storeError: () => undefined,
    } as unknown as DecisionObserver;
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml"), observer });
    const r = await post(`${await serve(service)}/v1/check`, check);
    expect(r.status).toBe(500);
    expect(r.body.error).toBe("internal");
    expect(r.body.message).not.toMatch(/store failed/);
    // The error itself is in the log, not the body (internal-error-body.test.ts).
    expect(r.body.message).toMatch(
      /^internal error \(a bug in the service, not a store failure\): the service's log has it, error id [0-9a-f]+$/,
    );
    expect(r.body.message).not.toMatch(/reading 'count'/);
  });

  it("a failing store is 503 'the store failed', on every route that calls it, whatever it throws", async () => {
    for (const error of [() => new Error("connect ECONNREFUSED 127.0.0.1:6379"), () => new TypeError("fetch failed")]) {
      const service = new DecisionService({ store: failingStore(error), rules: parseRules(RULES, "r.yaml") });
      const url = await serve(service);
      const answers = [
        await post(`${url}/v1/check`, check),
        await post(`${url}/v1/check`, { checks: [check] }),
        await post(`${url}/v1/leases/acquire`, { pool: "reports", key: "t" }),
        await post(`${url}/v1/admin/keys/d/k=1/reset`, undefined, true),
      ];
      for (const r of answers) {
        expect(r.status, r.body.message).toBe(503);
        expect(r.body.error).toBe("unavailable");
        // The kind of error, never its text (store-error-body.test.ts).
        expect(r.body.message).toMatch(
          /^the store failed: the store threw (Error|TypeError); the service's log has the error, error id [0-9a-f]+$/,
        );
      }
      close?.();
    }
  });

  it("a failing overrides database is 503 on the admin API", async () => {
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml") });
    const url = await serve(
      service,
      failingOverrides(() => new Error("SQLITE_IOERR: disk I/O error")),
    );
    const list = await fetch(`${url}/v1/admin/overrides`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(list.status).toBe(503);
    expect(((await list.json()) as { message: string }).message).toMatch(/^the overrides database failed: SQLite threw Error;/);
    const block = await post(`${url}/v1/admin/keys/d/k=1/block`, { ttl: "1h" }, true);
    expect(block.status).toBe(503);
    expect(block.body.message).toMatch(/^the overrides database failed: SQLite threw Error;/);
  });

  it("over gRPC: a bug is INTERNAL, a failing store UNAVAILABLE", async () => {
    const throwing = {
      decision: () => {
        throw new TypeError("boom");
      },
      storeLatency: () => undefined,
      storeError: () => undefined,
    } as unknown as DecisionObserver;
    const services = [
      new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml"), observer: throwing }),
      new DecisionService({ store: failingStore(() => new TypeError("fetch failed")), rules: parseRules(RULES, "r.yaml") }),
    ];
    const codes: [number, string][] = [];
    for (const service of services) {
      const server = createGrpcServer({ service, logger: createLogger("silent") });
      const client = rlsClient(await bindGrpc(server, "127.0.0.1", 0));
      try {
        await client.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "k", value: "1" }] }] });
      } catch (e) {
        codes.push([(e as { code: number }).code, (e as { details: string }).details]);
      } finally {
        client.close();
        server.forceShutdown();
      }
    }
    expect(codes).toEqual([
      [
        13,
        expect.stringMatching(
          /^internal error \(a bug in the service, not a store failure\): the service's log has it, error id [0-9a-f]+$/,
        ),
      ], // INTERNAL
      [14, expect.stringMatching(/^the store failed: the store threw TypeError; the service's log has the error, error id [0-9a-f]+$/)], // UNAVAILABLE
    ]);
  });
});
