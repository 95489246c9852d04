/**
 * A Redis outage under `--redis-failure throw`: every request is answered 503, and each logged a
 * "request failed" line with the error and its stack: a flood of requests during the outage was
 * a flood of log lines, the size of the traffic (and with stdout a slow pipe, the service's own
 * brake). Now the failures of one kind share an error id for a while, the log writes the first
 * of each id in full and counts the others, one line per interval naming the id: every error id a
 * client is answered is still found in the log, on the line with the error.
 * Played with `ratekeeper serve` pointed at a port where no Redis listens (an outage from the
 * start), flooded with checks over HTTP and gRPC; SIGTERM writes the counts still pending.
 */
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../../../test-support/process.js";
import { rlsClient, ROOT, startServiceProcess, type ServiceProc } from "../support.js";

let svc: ServiceProc | undefined;
afterAll(async () => {
  await svc?.stop();
});

const REQUESTS = 300;

describe("a flood of requests during a Redis outage answered with errors", () => {
  it("logs each error id once, in full, and counts its repeats; every id answered is in the log", async () => {
    const port = await freePort(); // nothing listens there
    svc = await startServiceProcess([
      "--config",
      path.join(ROOT, "examples/rules.yaml"),
      "--redis",
      `redis://127.0.0.1:${port}`,
      "--redis-failure",
      "throw",
    ]);
    const ids: string[] = [];
    const idOf = (text: string) => /error id ([0-9a-f]{12})$/.exec(text)?.[1] ?? `none in ${text}`;
    const body = JSON.stringify({ domain: "web", descriptors: [{ remote_address: "10.0.0.1" }] });
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < REQUESTS) {
          const r = await fetch(`${svc?.base}/v1/check`, { method: "POST", body, headers: { "content-type": "application/json" } });
          const j = (await r.json()) as { error: string; message: string };
          expect([r.status, j.error]).toEqual([503, "unavailable"]);
          ids.push(idOf(j.message));
        }
      }),
    );
    // The same over gRPC (Envoy's RLS): UNAVAILABLE, its details naming the id.
    const grpcIds: string[] = [];
    const rls = rlsClient(svc.grpcPort);
    try {
      for (let i = 0; i < 50; i++) {
        const request = { domain: "web", descriptors: [{ entries: [{ key: "remote_address", value: "10.0.0.1" }] }] };
        const e = (await rls.shouldRateLimit(request).then(
          () => undefined,
          (x: unknown) => x,
        )) as { code: number; details: string } | undefined;
        expect(e?.code).toBe(14);
        grpcIds.push(idOf(e?.details ?? ""));
      }
    } finally {
      rls.close();
    }
    expect(await svc.stop()).toBe(0); // the counts still pending are written at shutdown
    // "exit" may come before the last of stdout is read: wait for its end.
    const out = svc.proc.stdout;
    if (out && !out.readableEnded) await new Promise((resolve) => out.once("end", resolve));

    const lines = svc.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
    const full = lines.filter((l) => l.msg === "request failed");
    const counts = lines.filter((l) => l.repeats === "request failed");
    // A few lines, not one a request: one per error id (a kind of failure, per 10 s), and its counts.
    const distinct = new Set(ids);
    expect(distinct.size).toBeLessThan(20);
    expect(full.length).toBe(distinct.size);
    // Every id answered is on a full line with the error; the others are counted under it.
    for (const id of distinct) {
      const first = full.filter((l) => l.errorId === id);
      expect(first, `a "request failed" line with errorId ${id}`).toHaveLength(1);
      expect(JSON.stringify(first[0]?.err)).toMatch(/ECONNREFUSED|circuit breaker|Connection is closed|writeable/);
      const counted = counts.filter((l) => l.errorId === id).reduce((n, l) => n + (l.suppressed as number), 0);
      expect(1 + counted, `errorId ${id}: the line and its count`).toBe(ids.filter((x) => x === id).length);
    }
    for (const c of counts) expect(c.msg).toMatch(/^request failed: \d+ more like this in the last \d+ s \(same errorId\)$/);
    // gRPC's line, "ShouldRateLimit failed", the same: once per id, its repeats counted.
    for (const id of new Set(grpcIds)) {
      expect(lines.filter((l) => l.msg === "ShouldRateLimit failed" && l.errorId === id)).toHaveLength(1);
      const counted = lines
        .filter((l) => l.repeats === "ShouldRateLimit failed" && l.errorId === id)
        .reduce((n, l) => n + (l.suppressed as number), 0);
      expect(1 + counted).toBe(grpcIds.filter((x) => x === id).length);
    }
    expect(lines.filter((l) => l.msg === "ShouldRateLimit failed").length).toBeLessThan(20);
  }, 90_000);
});
