/**
 * The rules file changed under a running service in the ways that broke hot reload: written in
 * two parts with a pause, truncated to nothing, grown to 15 MB, replaced through a symlink, and
 * swapped the way a Kubernetes ConfigMap volume swaps its `..data` directory. The last good rules
 * must stay in force until a whole, settled, non-empty file is there; /healthz keeps answering.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";
import { startServiceProcess, type ServiceProc } from "../support.js";

/** Rules with one descriptor `user` at `limit` per hour in domain `t`, and `extra` more domains. */
function rules(limit: number, extra = 0): string {
  let s = `domains:\n  - domain: t\n    descriptors:\n      - key: user\n        algorithm: fixed-window\n        limit: ${limit}\n        window: 1h\n`;
  for (let i = 0; i < extra; i++)
    s += `  - domain: x${i}\n    descriptors:\n      - key: user_${i}\n        algorithm: gcra\n        limit: ${(i % 500) + 1}\n        window: 1m\n        burst: 3\n`;
  return s;
}

const running: ServiceProc[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "rk-hostile-reload-"));
  dirs.push(d);
  return d;
}

async function start(config: string): Promise<ServiceProc> {
  const svc = await startServiceProcess(["--config", config]);
  running.push(svc);
  return svc;
}

/** The limit in force for `user` in domain `t` (a peek: charges nothing). */
async function limitNow(svc: ServiceProc): Promise<number> {
  const j = (await (await fetch(`${svc.base}/v1/keys/t/user=probe`)).json()) as { statuses: { limit: number }[] };
  return j.statuses[0]!.limit;
}

const count = (svc: ServiceProc, text: string) => svc.lines.filter((l) => l.includes(text)).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("rules reload under hostile edits", () => {
  it("a file written in two parts 750 ms apart is applied once, whole, never half-way", async () => {
    const dir = tempDir();
    const file = path.join(dir, "rules.yaml");
    writeFileSync(file, rules(3, 4));
    const svc = await start(file);
    const full = rules(7, 40);
    // The first part alone is valid YAML with fewer domains (and the new limit): applying it
    // would drop the other domains' limits.
    const cut = full.indexOf("  - domain: x20\n");
    writeFileSync(file, full.slice(0, cut));
    await sleep(750);
    writeFileSync(file, full);
    await until(async () => (await limitNow(svc)) === 7, "the new limit", 300);
    await until(() => count(svc, '"msg":"rules reloaded"') > 0, "the reload to be logged");
    const reloads = svc.lines.filter((l) => l.includes('"msg":"rules reloaded"'));
    expect(reloads).toHaveLength(1);
    expect(reloads[0]).toContain('"rules":41');
  });

  it("a file truncated to nothing, or to an empty list, is refused: the limits stay", async () => {
    const dir = tempDir();
    const file = path.join(dir, "rules.yaml");
    writeFileSync(file, rules(3));
    const svc = await start(file);
    writeFileSync(file, "");
    await until(() => count(svc, "rules reload failed") === 1, "the empty file to be refused", 300);
    expect(svc.lines.find((l) => l.includes("rules reload failed"))).toContain("no rules");
    expect(await limitNow(svc)).toBe(3);
    writeFileSync(file, "domains: []\n");
    await until(() => count(svc, "rules reload failed") === 2, "the empty list to be refused", 300);
    expect(await limitNow(svc)).toBe(3);
    writeFileSync(file, rules(9));
    await until(async () => (await limitNow(svc)) === 9, "a good file to apply again", 300);
  });

  it("a 15 MB file is refused unread; a 1 MB one is parsed while /healthz keeps answering", async () => {
    const dir = tempDir();
    const file = path.join(dir, "rules.yaml");
    writeFileSync(file, rules(3));
    const svc = await start(file);
    let big = rules(5);
    while (big.length < 15_000_000) big += rules(1, 2000).slice(rules(1).length);
    writeFileSync(file, big);
    let answered = 0;
    await until(
      async () => {
        answered += (await fetch(`${svc.base}/healthz`)).status === 200 ? 1 : 0;
        return count(svc, "rules reload failed") === 1;
      },
      "the 15 MB file to be refused",
      300,
    );
    expect(svc.lines.find((l) => l.includes("rules reload failed"))).toMatch(/over the \d+-byte limit/);
    expect(await limitNow(svc)).toBe(3);
    expect(answered).toBeGreaterThan(0);

    // Under the limit but slow to parse: /healthz answers between "parsing" and "reloaded".
    const medium = rules(6, 8_000);
    expect(medium.length).toBeGreaterThan(1_000_000);
    writeFileSync(file, medium);
    await until(() => count(svc, "rules file changed: parsing") === 1, "the parse to start", 300);
    let during = 0;
    while (count(svc, '"msg":"rules reloaded"') === 0 && count(svc, "rules reload failed") === 1) {
      const r = await fetch(`${svc.base}/healthz`);
      expect(r.status).toBe(200);
      if (count(svc, '"msg":"rules reloaded"') === 0) during++;
    }
    expect(count(svc, '"msg":"rules reloaded"'), svc.lines.slice(-5).join("\n")).toBe(1);
    expect(during).toBeGreaterThanOrEqual(3);
    expect(await limitNow(svc)).toBe(6);
  });

  it("follows a symlink: an edit of its target, then the link pointed elsewhere", async () => {
    const dir = tempDir();
    mkdirSync(path.join(dir, "real"));
    const a = path.join(dir, "real", "a.yaml");
    const b = path.join(dir, "real", "b.yaml");
    writeFileSync(a, rules(3));
    const link = path.join(dir, "rules.yaml");
    symlinkSync(path.join("real", "a.yaml"), link);
    const svc = await start(link);
    writeFileSync(a, rules(4));
    await until(async () => (await limitNow(svc)) === 4, "the edit of the target", 300);
    writeFileSync(b, rules(5));
    symlinkSync(path.join("real", "b.yaml"), path.join(dir, "rules.tmp"));
    renameSync(path.join(dir, "rules.tmp"), link);
    await until(async () => (await limitNow(svc)) === 5, "the swapped link", 300);
  });

  it("follows a Kubernetes ConfigMap update (the ..data symlink swapped to a new directory)", async () => {
    const dir = tempDir();
    const generation = (name: string, limit: number) => {
      mkdirSync(path.join(dir, name));
      writeFileSync(path.join(dir, name, "rules.yaml"), rules(limit));
    };
    generation("..2026_01_01_00_00_00.000000001", 3);
    symlinkSync("..2026_01_01_00_00_00.000000001", path.join(dir, "..data"));
    symlinkSync(path.join("..data", "rules.yaml"), path.join(dir, "rules.yaml"));
    const svc = await start(path.join(dir, "rules.yaml"));
    expect(await limitNow(svc)).toBe(3);
    // What the kubelet does: a new timestamped directory, a ..data_tmp link to it renamed over
    // ..data (atomic), then the old directory removed.
    generation("..2026_01_01_00_01_00.000000002", 8);
    symlinkSync("..2026_01_01_00_01_00.000000002", path.join(dir, "..data_tmp"));
    renameSync(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
    rmSync(path.join(dir, "..2026_01_01_00_00_00.000000001"), { recursive: true });
    await until(async () => (await limitNow(svc)) === 8, "the new ConfigMap generation", 300);
  });
});
