/**
 * `POST /v1/leases/acquire` when the client goes away while its lease is being acquired (a slow
 * store: Redis under load): the lease is granted after the client left, and nobody will ever
 * have its id to release it. The service must give it back at once, not hold the slot until the
 * lease expires. The store's acquire waits on the test's gate until the server has seen the
 * connection close; no timings.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { SlowLeases } from "../../../test-support/slow-leases.js";
import { DecisionService, parseRules } from "../src/index.js";
import { createLogger } from "../src/log.js";
import { Metrics } from "../src/metrics.js";
import { createHttpServer } from "../src/transport/http.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
concurrency:
  reports: { limit: 1, lease: 1h }
`;

describe("POST /v1/leases/acquire, the client gone before the grant", () => {
  it("gives the lease back: the slot is free again", async () => {
    const store = new SlowLeases();
    const service = new DecisionService({ store, rules: parseRules(RULES, "r.yaml") });
    const server = await createHttpServer({
      service,
      metrics: new Metrics(),
      logger: createLogger("silent"),
      readiness: () => ({ ready: true }),
    });
    let closed = 0;
    server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => res.once("close", () => closed++));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    const pool = store.inner.bindLeases(1, "p.reports");
    try {
      const body = JSON.stringify({ pool: "reports", key: "tenant:7" });
      const req = http.request({
        host: "127.0.0.1",
        port,
        path: "/v1/leases/acquire",
        method: "POST",
        agent: false,
        headers: { "content-type": "application/json" },
      });
      req.on("error", () => undefined);
      req.end(body);
      await until(() => store.waiting === 1, "the acquire to reach the store", 400, 5);
      req.destroy();
      await until(() => closed === 1, "the server to see the client gone", 400, 5);
      store.open();
      await until(() => store.answered === 1, "the acquire to be answered", 400, 5);
      expect(closed).toBe(1);
      await until(async () => (await pool.count("tenant:7", undefined)).remaining === 1, "the lease back", 200, 10);
    } finally {
      store.open();
      server.closeAllConnections();
      server.close();
    }
  });
});
