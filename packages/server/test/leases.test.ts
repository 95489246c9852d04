/**
 * Concurrency leases through the decision service (`concurrency:` in the rules file,
 * `POST /v1/leases/acquire|renew|release`): on the embedded memory store, and two service
 * instances on one Redis giving out exactly the pool's limit between them under a burst of
 * concurrent acquires. Hostile bodies get a 400 naming the field; a guessed id releases nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { getJson, postJson, startServiceProcess, type ServiceProc } from "./support.js";

const RULES = `
concurrency:
  reports: { limit: 3, lease: 2s }
  uploads: { limit: 2 }
  jobs: { limit: 5, lease: 1m }
`;

let dir: string;
function rulesFile(): string {
  dir = mkdtempSync(path.join(tmpdir(), "rk-leases-"));
  const file = path.join(dir, "rules.yaml");
  writeFileSync(file, RULES);
  return file;
}

describe("leases through the service, memory store", () => {
  let svc: ServiceProc;
  beforeAll(async () => {
    svc = await startServiceProcess(["--config", rulesFile(), "--no-watch"]);
  });
  afterAll(async () => {
    await svc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("acquire up to the limit, then 429 with Retry-After; release frees a slot; renew keeps one past its lease", async () => {
    const url = (op: string) => `${svc.base}/v1/leases/${op}`;
    const got = [];
    for (let i = 0; i < 3; i++) got.push(await postJson(url("acquire"), { pool: "reports", key: "tenant:7" }));
    expect(got.map((g) => [g.status, g.json.acquired, g.json.remaining])).toEqual([
      [200, true, 2],
      [200, true, 1],
      [200, true, 0],
    ]);
    expect(got[0]?.json).toMatchObject({ pool: "reports", key: "tenant:7", limit: 3, leaseMs: 2000, retryAfterMs: 0 });
    const full = await postJson(url("acquire"), { pool: "reports", key: "tenant:7" });
    expect(full.status).toBe(429);
    expect(full.json).toMatchObject({ acquired: false, reason: "limit", remaining: 0 });
    expect(full.json.id).toBeUndefined();
    expect(full.json.retryAfterMs).toBeGreaterThan(0);
    expect(full.headers.get("retry-after")).toBe("2");
    // Other keys and pools are separate.
    expect((await postJson(url("acquire"), { pool: "reports", key: "tenant:8" })).status).toBe(200);
    expect((await postJson(url("acquire"), { pool: "uploads", key: "tenant:7" })).status).toBe(200);

    const [a, b] = [got[0]?.json.id as string, got[1]?.json.id as string];
    expect((await postJson(url("release"), { pool: "reports", key: "tenant:7", id: a })).json).toEqual({ released: true });
    expect((await postJson(url("release"), { pool: "reports", key: "tenant:7", id: a })).json).toEqual({ released: false });
    const again = await postJson(url("acquire"), { pool: "reports", key: "tenant:7" });
    expect(again.status).toBe(200);
    // b renewed now and again after 1.2 s outlives the 2 s lease; the others expire.
    await new Promise((r) => setTimeout(r, 1200));
    expect((await postJson(url("renew"), { pool: "reports", key: "tenant:7", id: b })).json).toEqual({ renewed: true });
    await new Promise((r) => setTimeout(r, 1200));
    const after = await postJson(url("acquire"), { pool: "reports", key: "tenant:7" });
    expect(after.json).toMatchObject({ acquired: true, remaining: 1 }); // b still held, the rest expired
    expect((await postJson(url("renew"), { pool: "reports", key: "tenant:7", id: got[2]?.json.id })).json).toEqual({ renewed: false });
  });

  it("hostile and wrong bodies: 400 naming the field; a guessed id releases nothing", async () => {
    const url = (op: string) => `${svc.base}/v1/leases/${op}`;
    const held = await postJson(url("acquire"), { pool: "uploads", key: "victim" });
    expect(held.status).toBe(200);
    const cases: Array<[string, unknown, RegExp]> = [
      ["acquire", { pool: "nope", key: "k" }, /pool: no concurrency pool "nope" in the rules \(known: reports, uploads, jobs\)/],
      ["acquire", { key: "k" }, /pool: must be the name of a pool/],
      ["acquire", { pool: "reports", key: "" }, /key: must be a string of 1-512 characters/],
      ["acquire", { pool: "reports", key: "x".repeat(513) }, /key: must be a string/],
      ["acquire", { pool: "reports", key: "k", cost: 5 }, /cost: unknown field \(known: pool, key\)/],
      ["acquire", [1, 2], /body: must be a JSON object/],
      ["acquire", "null", /body: must be a JSON object/],
      ["renew", { pool: "uploads", key: "victim" }, /id: must be the id that acquire answered/],
      ["release", { pool: "uploads", key: "victim", id: "AAAAAAAAAAAA1.AAAAAAAA" }, /^$/],
      ["release", { pool: "uploads", key: "victim", id: "x".repeat(65) }, /id: must be the id/],
      ["release", { pool: "uploads", key: "victim", id: "../../etc" }, /lease id: must be the id of an acquired lease/],
    ];
    for (const [op, body, message] of cases) {
      const r = await postJson(url(op), body);
      if (message.source === "^$") {
        expect(r.json, `${op} ${JSON.stringify(body)}`).toEqual({ released: false });
        continue;
      }
      expect(r.status, `${op} ${JSON.stringify(body)}`).toBe(400);
      expect(r.json.message).toMatch(message);
    }
    // A guess built from the victim's own id (same process prefix, next counter) is not it.
    const id = held.json.id as string;
    const [head] = id.split(".");
    const guess = `${head as string}.AAAAAAAA`;
    expect((await postJson(url("release"), { pool: "uploads", key: "victim", id: guess })).json).toEqual({ released: false });
    expect((await fetch(url("acquire"))).status).toBe(405);
    expect((await postJson(url("steal"), { pool: "uploads", key: "victim" })).status).toBe(404);
    expect((await getJson(`${svc.base}/v1/rules`)).concurrency).toEqual({
      reports: { limit: 3, leaseMs: 2000 },
      uploads: { limit: 2, leaseMs: 30000 },
      jobs: { limit: 5, leaseMs: 60000 },
    });
  });
});

describeRedis("leases through two service instances on one Redis", () => {
  let redis: RedisHandle;
  let a: ServiceProc;
  let b: ServiceProc;
  beforeAll(async () => {
    redis = await startRedis();
    const args = ["--config", rulesFile(), "--redis", redis.url, "--no-watch"];
    [a, b] = await Promise.all([startServiceProcess(args), startServiceProcess(args)]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("200 concurrent acquires over both instances: exactly the limit granted; every slot back after the releases", async () => {
    const acquire = (svc: ServiceProc) => postJson(`${svc.base}/v1/leases/acquire`, { pool: "jobs", key: "shared" });
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => acquire(i % 2 === 0 ? a : b)));
    const granted = answers.filter((r) => r.status === 200);
    expect(granted.length).toBe(5);
    expect(answers.filter((r) => r.status === 429).length).toBe(195);
    expect(answers.every((r) => r.json.reason === undefined || r.json.reason === "limit")).toBe(true);
    // Released through the other instance than the one that granted it.
    for (const g of granted) {
      const r = await postJson(`${b.base}/v1/leases/release`, { pool: "jobs", key: "shared", id: g.json.id });
      expect(r.json).toEqual({ released: true });
    }
    const again = await Promise.all(Array.from({ length: 6 }, () => acquire(a)));
    expect(again.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 429]);
  });
});
