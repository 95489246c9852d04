/**
 * A flood of fresh sliding-log keys through the service (a process on the in-memory store), the
 * process's resident memory read from /proc while it runs: 150,000 keys charged 1 unit each,
 * then 150,000 keys charged 500 units each (a limit of 1000: each key logs 500 timestamps).
 * Memory must stay bounded: the store's estimate within its `maxBytes` (64 MiB here, shown in
 * /metrics), and the process's RSS within that bound plus a fixed margin, however many keys come.
 */
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServiceProcess, type ServiceProc } from "../support.js";

const RULES = `
domains:
  - domain: flood
    descriptors:
      - key: user
        algorithm: sliding-log
        limit: 1000
        window: 1h
`;
/** The memory store's byte bound for this test (--memory-max-bytes; the default is 256 MiB). */
const MAX_BYTES = 64 * 2 ** 20;
const MiB = 2 ** 20;
/** Checks per request: within the default 64 KiB body. */
const BATCH = 500;
const linux = process.platform === "linux";

let svc: ServiceProc;
let dir: string;

beforeAll(async () => {
  if (!linux) return;
  dir = mkdtempSync(path.join(tmpdir(), "rk-hostile-mem-"));
  writeFileSync(path.join(dir, "rules.yaml"), RULES);
  svc = await startServiceProcess(["--config", path.join(dir, "rules.yaml"), "--no-watch", "--memory-max-bytes", String(MAX_BYTES)]);
});

afterAll(async () => {
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Resident set size of a process, in bytes (Linux /proc). */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) * 1024;
}

/** A Prometheus gauge's value from /metrics text. */
function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

describe.skipIf(!linux)("a 300,000-key sliding-log flood through the service", () => {
  it("keeps the store within maxBytes and the process's RSS bounded", async () => {
    const pid = svc.proc.pid as number;
    const baseline = rss(pid);
    // The bound: the store's bytes, plus garbage not yet collected (a turn drops half of them at
    // once), the allocator's slack and the requests' own garbage (batches of JSON): a margin that
    // does not grow with the number of keys. (Unbounded, the flood passes it within 40,000 keys.)
    const bound = baseline + 2 * MAX_BYTES + 128 * MiB;
    let peak = baseline;
    let sent = 0;
    for (const [keys, cost] of [
      [150_000, 1],
      [150_000, 500],
    ] as const) {
      for (let from = 0; from < keys; from += BATCH) {
        const checks = [];
        for (let i = from; i < from + BATCH; i++)
          checks.push({ domain: "flood", descriptors: [[{ key: "user", value: `u${cost}-${i}` }]], cost });
        const r = await fetch(`${svc.base}/v1/check`, { method: "POST", body: JSON.stringify({ checks }) });
        expect(r.status).toBe(200);
        await r.arrayBuffer();
        sent += BATCH;
        peak = Math.max(peak, rss(pid));
        // Stop early (and fail) rather than eat the machine's memory.
        if (peak > bound) break;
      }
    }
    expect(
      peak,
      `RSS peaked at ${Math.round(peak / MiB)} MiB after ${sent} keys (baseline ${Math.round(baseline / MiB)} MiB, bound ${Math.round(bound / MiB)} MiB)`,
    ).toBeLessThanOrEqual(bound);
    const metrics = await (await fetch(`${svc.base}/metrics`)).text();
    const bytes = gauge(metrics, "ratekeeper_memory_store_bytes");
    const maxBytes = gauge(metrics, "ratekeeper_memory_store_max_bytes");
    const keys = gauge(metrics, "ratekeeper_memory_store_keys");
    expect(maxBytes).toBe(MAX_BYTES);
    expect(bytes).toBeLessThanOrEqual(MAX_BYTES);
    expect(keys).toBeGreaterThan(0);
    expect(sent).toBe(300_000);
  });
});
