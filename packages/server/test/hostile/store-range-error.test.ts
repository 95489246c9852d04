/**
 * A store that fails with a RangeError (a memory store whose table cannot grow: "Invalid array
 * length", "Array buffer allocation failed"; a client library's own range check; a stack overflow)
 * is the store failing, not the client's input: 503 `unavailable`, "the store failed", on every
 * route, whether the store throws at once or rejects later (a reset's validation rejects
 * asynchronously, so a mapping of synchronous throws alone would not tell them apart). Bad input
 * is still the client's 400, naming the field (a lone surrogate in a descriptor handed to the
 * service directly, without a transport's checks), and the overrides database's RangeError is
 * 503 too, but for a forged cursor (400). Before, any RangeError was answered 400, blaming the
 * client for the store.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { createLogger } from "../../src/log.js";
import { bindGrpc, createGrpcServer } from "../../src/transport/grpc.js";
import { rlsClient } from "../support.js";
import { failingOverrides, failingStore, serveHttp, TOKEN } from "./failing-parts.js";
import { CheckError, StoreFailure } from "../../src/service/types.js";
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
const rangeError = () => new RangeError("Invalid array length");

let close: (() => void) | undefined;
afterEach(() => close?.());

async function serve(service: DecisionService, overridesStore?: OverrideStore): Promise<string> {
  const s = await serveHttp(service, { overridesStore });
  close = s.close;
  return s.url;
}

async function call(url: string, body: unknown, method = "POST"): Promise<{ status: number; body: { error: string; message: string } }> {
  const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${TOKEN}` };
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error: string; message: string } };
}

const check = { domain: "d", descriptors: [{ k: "1" }] };

describe("a store's RangeError is the store failing, not the client's input", () => {
  for (const sync of [true, false]) {
    it(`HTTP: 503 on every route (the store ${sync ? "throws at once" : "rejects"})`, async () => {
      const service = new DecisionService({ store: failingStore(rangeError, sync), rules: parseRules(RULES, "r.yaml") });
      const url = await serve(service);
      const answers = {
        check: await call(`${url}/v1/check`, check),
        batch: await call(`${url}/v1/check`, { checks: [check] }),
        plain: await call(`${url}/v1/check`, { key: "u", policy: "p" }),
        peek: await call(`${url}/v1/keys/d/k=1`, undefined, "GET"),
        acquire: await call(`${url}/v1/leases/acquire`, { pool: "reports", key: "t" }),
        reset: await call(`${url}/v1/admin/keys/d/k=1/reset`, undefined),
      };
      for (const [route, r] of Object.entries(answers)) {
        expect([r.status, r.body.error], `${route}: ${r.body.message}`).toEqual([503, "unavailable"]);
        expect(r.body.message, route).toMatch(/^the store failed: the store threw RangeError;/);
      }
    });

    it(`the service itself: StoreFailure, not CheckError (the store ${sync ? "throws at once" : "rejects"})`, async () => {
      const service = new DecisionService({ store: failingStore(rangeError, sync), rules: parseRules(RULES, "r.yaml") });
      for (const p of [
        service.decide({ domain: "d", descriptors: [[{ key: "k", value: "1" }]] }),
        service.peek({ domain: "d", descriptors: [[{ key: "k", value: "1" }]] }),
        service.reset({ domain: "d", descriptors: [[{ key: "k", value: "1" }]] }),
      ]) {
        const e = await p.then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e, String(e)).toBeInstanceOf(StoreFailure);
      }
    });
  }

  it("gRPC: UNAVAILABLE, not INVALID_ARGUMENT", async () => {
    const service = new DecisionService({ store: failingStore(rangeError, false), rules: parseRules(RULES, "r.yaml") });
    const server = createGrpcServer({ service, logger: createLogger("silent") });
    const client = rlsClient(await bindGrpc(server, "127.0.0.1", 0));
    try {
      const e = await client.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "k", value: "1" }] }] }).then(
        () => undefined,
        (x: unknown) => x as { code: number },
      );
      expect(e?.code).toBe(14); // UNAVAILABLE
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it("bad input is still the client's: a lone surrogate handed to the service directly is a CheckError naming the key", async () => {
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml") });
    for (const p of [
      service.decide({ domain: "d", descriptors: [[{ key: "k", value: "a\ud800" }]] }),
      service.peek({ domain: "d", descriptors: [[{ key: "k", value: "a\ud800" }]] }),
      service.reset({ domain: "d", descriptors: [[{ key: "k", value: "a\ud800" }]] }),
    ]) {
      const e = await p.then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(CheckError);
      expect((e as Error).message).toMatch(/^key: has a lone surrogate/);
    }
  });

  it("the overrides database's RangeError is 503 on the admin API (a forged cursor stays 400: admin-input.test.ts)", async () => {
    const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml") });
    const url = await serve(
      service,
      failingOverrides(() => new RangeError("Invalid string length")),
    );
    const answers = {
      list: await call(`${url}/v1/admin/overrides`, undefined, "GET"),
      block: await call(`${url}/v1/admin/keys/d/k=1/block`, { ttl: "1h" }),
      get: await call(`${url}/v1/admin/overrides/d/k=1`, undefined, "GET"),
    };
    for (const [route, r] of Object.entries(answers)) {
      expect([r.status, r.body.error], `${route}: ${r.body.message}`).toEqual([503, "unavailable"]);
    }
  });
});
