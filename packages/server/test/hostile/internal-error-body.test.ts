/**
 * A 500 (gRPC INTERNAL) answers a bug in the service: its body must not carry the error's own
 * message across the trust boundary (stack details, file paths, connection strings, the keys of
 * other tenants that the failing code was holding). The body says what kind of error it was and
 * gives an error id; the service's log has the error itself, with the same id, so an operator
 * handed the id finds the line. Before, the body and the gRPC details echoed the message.
 */
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { Metrics } from "../../src/metrics.js";
import { createHttpServer } from "../../src/transport/http.js";
import { bindGrpc, createGrpcServer } from "../../src/transport/grpc.js";
import { rlsClient } from "../support.js";
import { captureLog, idIn } from "./failing-parts.js";
import type { DecisionObserver } from "../../src/service/types.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const SECRET = "redis://:hunter2@10.0.0.5:6379 at /srv/app/dist/secret.js:12 tenant-b|user=alice";

/** A service whose observer throws (a bug), and the log lines it writes. */
function buggy(): { service: DecisionService; lines: Record<string, unknown>[]; logger: pino.Logger } {
  const { lines, logger } = captureLog();
  const observer = {
    decision: () => {
      throw new TypeError(`cannot count ${SECRET}`);
    },
    storeLatency: () => undefined,
    storeError: () => undefined,
  } as unknown as DecisionObserver;
  const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml"), observer });
  return { service, lines, logger };
}

let close: (() => void) | undefined;
afterEach(() => close?.());

describe("a 500's body is generic; the log has the error", () => {
  it("HTTP: 500 internal, no error message in the body, its id in the log line with the error", async () => {
    const { service, lines, logger } = buggy();
    const server = await createHttpServer({ service, metrics: new Metrics(), logger, readiness: () => ({ ready: true }) });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    close = () => {
      server.closeAllConnections();
      server.close();
    };
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const res = await fetch(`${url}/v1/check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ domain: "d", descriptors: [{ k: "1" }] }),
    });
    const text = await res.text();
    expect(res.status).toBe(500);
    const body = JSON.parse(text) as { error: string; message: string };
    expect(body.error).toBe("internal");
    expect(body.message).toMatch(/^internal error \(a bug in the service, not a store failure\)/);
    for (const part of ["hunter2", "10.0.0.5", "/srv/app", "tenant-b", "alice", "cannot count"]) expect(text).not.toContain(part);
    const id = idIn(body.message);
    expect(id).toBeDefined();
    const logged = lines.filter((l) => l.msg === "request failed");
    expect(logged).toHaveLength(1);
    expect(logged[0]?.errorId).toBe(id);
    expect(JSON.stringify(logged[0]?.err)).toContain("hunter2");
  });

  it("gRPC: INTERNAL, no error message in the details, its id in the log line with the error", async () => {
    const { service, lines, logger } = buggy();
    const server = createGrpcServer({ service, logger });
    const client = rlsClient(await bindGrpc(server, "127.0.0.1", 0));
    try {
      const e = await client.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "k", value: "1" }] }] }).then(
        () => undefined,
        (x: unknown) => x as { code: number; details: string },
      );
      expect(e?.code).toBe(13);
      const details = e?.details ?? "";
      expect(details).toMatch(/^internal error \(a bug in the service, not a store failure\)/);
      for (const part of ["hunter2", "10.0.0.5", "/srv/app", "tenant-b", "alice", "cannot count"]) expect(details).not.toContain(part);
      const logged = lines.filter((l) => l.msg === "ShouldRateLimit failed");
      expect(logged).toHaveLength(1);
      expect(logged[0]?.errorId).toBe(idIn(details));
      expect(JSON.stringify(logged[0]?.err)).toContain("hunter2");
    } finally {
      client.close();
      server.forceShutdown();
    }
  });
});
