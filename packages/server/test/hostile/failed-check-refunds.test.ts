/**
 * A check answered with an error charges nothing: a batch (`POST /v1/check` with `checks`)
 * answered 503 because one check's store call failed, and a check of several descriptors (HTTP,
 * or Envoy's ShouldRateLimit over gRPC) answered 503 / UNAVAILABLE because one descriptor's did,
 * give back what the checks and descriptors decided before (or beside) the failure had charged
 * (the limiter's refund), so a client that retries is not charged twice. A refund that fails is
 * logged, with the error id the answer gave. Before, those charges stayed.
 */
import { afterEach, describe, expect, it } from "vitest";
import { DecisionService, parseRules } from "../../src/index.js";
import { bindGrpc, createGrpcServer } from "../../src/transport/grpc.js";
import { rlsClient } from "../support.js";
import { captureLog, idIn, serveHttp, storeFailingOnCall } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const boom = () => new Error("connection lost");

let close: (() => void) | undefined;
afterEach(() => close?.());

/** A service on a store whose `n`th consume fails; `left(v)`: what a cost-1 request on `k=v` would leave (4 when nothing is charged). */
async function setup(n: number, refundsFail = false) {
  const parts = storeFailingOnCall(n, boom, refundsFail);
  const { lines, logger } = captureLog();
  const service = new DecisionService({ store: parts.store, rules: parseRules(RULES, "r.yaml"), logger });
  const s = await serveHttp(service, { logger });
  close = s.close;
  const post = async (body: unknown) => {
    const r = await fetch(`${s.url}/v1/check`, { method: "POST", body: JSON.stringify(body) });
    return { status: r.status, json: (await r.json()) as Record<string, any> };
  };
  const left = async (v: string) =>
    (await service.peek({ domain: "d", descriptors: [[{ key: "k", value: v }]] })).statuses[0]?.remaining as number;
  return { ...parts, service, lines, post, left };
}

const one = (v: string) => ({ domain: "d", descriptors: [{ k: v }] });

describe("a check answered with an error charges nothing", () => {
  it("a batch answered 503 gives back what its other checks charged", async () => {
    const t = await setup(2);
    const r = await t.post({ checks: [one("a"), one("b"), one("c")] });
    expect(r.status).toBe(503);
    expect(t.consumes()).toBe(3);
    expect([await t.left("a"), await t.left("b"), await t.left("c")]).toEqual([4, 4, 4]);
    // Retried, it is charged once.
    const again = await t.post({ checks: [one("a"), one("b"), one("c")] });
    expect(again.status).toBe(200);
    expect([await t.left("a"), await t.left("b"), await t.left("c")]).toEqual([3, 3, 3]);
  });

  it("a batch with a check that cannot be decided answers 200, the error in its place; the other checks keep their charges", async () => {
    const t = await setup(0);
    const r = await t.post({ checks: [one("a"), { domain: "d" }, one("b")] });
    expect(r.status).toBe(200);
    expect(r.json.results[1]).toMatchObject({ error: "bad_request" });
    expect([r.json.results[0].allowed, r.json.results[2].allowed]).toEqual([true, true]);
    expect([await t.left("a"), await t.left("b")]).toEqual([3, 3]);
    expect(t.refunds()).toBe(0);
  });

  it("a batch with a check that cannot be decided and one whose store call fails answers 503 and gives back every charge", async () => {
    const t = await setup(2);
    const r = await t.post({ checks: [one("a"), { domain: "d" }, one("b"), one("c")] });
    expect(r.status).toBe(503);
    expect(t.consumes()).toBe(3);
    expect([await t.left("a"), await t.left("b"), await t.left("c")]).toEqual([4, 4, 4]);
  });

  it("a check of several descriptors answered 503 gives back what the others charged", async () => {
    const t = await setup(2);
    const r = await t.post({ domain: "d", descriptors: [{ k: "a" }, { k: "b" }, { k: "c" }] });
    expect(r.status).toBe(503);
    expect([await t.left("a"), await t.left("b"), await t.left("c")]).toEqual([4, 4, 4]);
  });

  it("so does Envoy's ShouldRateLimit with several descriptors (UNAVAILABLE)", async () => {
    const t = await setup(2);
    const server = createGrpcServer({ service: t.service, logger: captureLog().logger });
    const client = rlsClient(await bindGrpc(server, "127.0.0.1", 0));
    try {
      const descriptors = ["a", "b", "c"].map((v) => ({ entries: [{ key: "k", value: v }] }));
      const e = await client.shouldRateLimit({ domain: "d", descriptors }).then(
        () => undefined,
        (x: unknown) => x as { code: number },
      );
      expect(e?.code).toBe(14); // UNAVAILABLE
      expect([await t.left("a"), await t.left("b"), await t.left("c")]).toEqual([4, 4, 4]);
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it("a refund that fails is logged with the answer's error id", async () => {
    const t = await setup(2, true);
    const r = await t.post({ checks: [one("a"), one("b"), one("c"), one("d")] });
    expect(r.status).toBe(503);
    const id = idIn(r.json.message as string);
    expect(t.refunds()).toBe(3);
    // One line for the batch's refunds, saying how many failed, not one per refund.
    await new Promise((r) => setImmediate(r));
    const logged = t.lines.filter((l) => l.msg === "refund failed: a check answered with an error stays charged");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ errorId: id, cost: 1, key: "d|k=a", failed: 3, of: 3 });
  });
});
