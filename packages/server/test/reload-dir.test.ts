/**
 * Hot reload of a directory of rules files (envoyproxy/ratelimit's runtime layout), as files are
 * added, changed and removed, with the single-file reload's safety: settled files only (never a
 * file half-written), empty files and empty directories refused, bad files and duplicate domains
 * refused naming the file, the last good rules kept meanwhile; and the symlink swaps deploys do
 * (a RUNTIME_ROOT `current -> v2`, a Kubernetes ConfigMap's `..data`).
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { watchRulesDir } from "../src/config/reload-dir.js";
import type { Rules } from "../src/config/rules.js";
import { createLogger } from "../src/log.js";
import { startService } from "../src/server.js";
import { rlsClient, startServiceProcess } from "./support.js";
import { scratch } from "./scratch.js";

const SETTLE = 150;
const { tempDir, stops } = scratch("reload-dir");

/** An envoyproxy/ratelimit file: domain `domain`, key `user` at `limit` per minute. */
const envoyFile = (domain: string, limit: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;

/** Watches `dir`; collects what was applied and refused. */
function watchDir(dir: string, extra: { mergeDomains?: boolean } = {}) {
  const applied: Rules[] = [];
  const errors: string[] = [];
  stops.push(
    watchRulesDir(dir, {
      settleMs: SETTLE,
      pollIntervalMs: 200,
      onReload: (r) => applied.push(r),
      onError: (e) => errors.push(e.message),
      ...extra,
    }),
  );
  return { applied, errors, last: () => applied[applied.length - 1] };
}

/** domain -> the `user` rule's limit, of rules. */
function limits(r: Rules | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const rule of r?.rules ?? []) if (rule.id.endsWith("/user")) out[rule.domain] = rule.limits[0]?.limit ?? -1;
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a directory of rules files, reloaded", () => {
  it("a file added, changed, then removed", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const w = watchDir(dir);
    writeFileSync(path.join(dir, "b.yaml"), envoyFile("b", 2));
    await until(() => limits(w.last()).b === 2, "b added");
    expect(limits(w.last())).toEqual({ a: 1, b: 2 });
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 5));
    await until(() => limits(w.last()).a === 5, "a changed");
    unlinkSync(path.join(dir, "b.yaml"));
    await until(() => limits(w.last()).b === undefined, "b removed");
    expect(limits(w.last())).toEqual({ a: 5 });
    expect(w.errors).toEqual([]);
  });

  it("a file in a subdirectory counts too (its recursive read)", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const w = watchDir(dir);
    mkdirSync(path.join(dir, "team"));
    writeFileSync(path.join(dir, "team", "t.yaml"), envoyFile("t", 3));
    await until(() => limits(w.last()).t === 3, "subdirectory file added");
  });

  it("a file written in two parts with a pause shorter than the settle time is applied once, whole", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const w = watchDir(dir);
    const full = envoyFile("b", 9) + "  - key: vip\n    rate_limit: { unlimited: true }\n";
    writeFileSync(path.join(dir, "b.yaml"), full.slice(0, 30)); // "domain: b\ndescriptors:\n  - ke": a domain with nothing
    await sleep(SETTLE / 3);
    writeFileSync(path.join(dir, "b.yaml"), full);
    await until(() => limits(w.last()).b === 9, "b applied");
    await sleep(SETTLE * 2);
    expect(w.applied).toHaveLength(1);
    expect(w.errors).toEqual([]);
    expect(
      w
        .last()
        ?.rules.map((r) => r.id)
        .sort(),
    ).toEqual(["a/user", "b/user", "b/vip"]);
  });

  it("a file truncated to nothing, a bad file, a duplicate domain: refused naming the file, once; the last good rules stay", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    writeFileSync(path.join(dir, "b.yaml"), envoyFile("b", 2));
    const w = watchDir(dir);
    writeFileSync(path.join(dir, "b.yaml"), "");
    await until(() => w.errors.length === 1, "empty refused");
    expect(w.errors[0]).toMatch(/b\.yaml: is empty/);
    writeFileSync(
      path.join(dir, "b.yaml"),
      "domain: b\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 2 }\n",
    );
    await until(() => w.errors.length === 2, "bad refused");
    expect(w.errors[1]).toMatch(/b\.yaml.*unit/);
    writeFileSync(path.join(dir, "b.yaml"), envoyFile("a", 3));
    await until(() => w.errors.length === 3, "duplicate refused");
    expect(w.errors[2]).toMatch(/b\.yaml.*duplicate domain 'a'/);
    await sleep(SETTLE * 3);
    expect(w.errors).toHaveLength(3);
    expect(w.applied).toEqual([]);
    writeFileSync(path.join(dir, "b.yaml"), envoyFile("b", 4));
    await until(() => limits(w.last()).b === 4, "fixed");
  });

  it("MERGE_DOMAIN_CONFIG: a domain split over two files merges on reload", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const w = watchDir(dir, { mergeDomains: true });
    writeFileSync(
      path.join(dir, "a2.yaml"),
      "domain: a\ndescriptors:\n  - key: team\n    rate_limit: { unit: hour, requests_per_unit: 7 }\n",
    );
    await until(() => (w.last()?.rules.length ?? 0) === 2, "merged");
    expect(
      w
        .last()
        ?.rules.map((r) => r.id)
        .sort(),
    ).toEqual(["a/team", "a/user"]);
  });

  it("every file removed: refused (the last good rules stay)", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const w = watchDir(dir);
    unlinkSync(path.join(dir, "a.yaml"));
    await until(() => w.errors.length === 1, "empty directory refused");
    expect(w.errors[0]).toMatch(/no rules files left/);
  });

  it("the directory removed, then made again (a deploy's rm -rf and copy): the new files apply without waiting for the poll", async () => {
    const root = tempDir();
    const dir = path.join(root, "config");
    mkdirSync(dir);
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const applied: Rules[] = [];
    const errors: string[] = [];
    stops.push(
      watchRulesDir(dir, { settleMs: SETTLE, pollIntervalMs: 0, onReload: (r) => applied.push(r), onError: (e) => errors.push(e.message) }),
    );
    rmSync(dir, { recursive: true });
    await until(() => errors.length === 1, "the removed directory to be refused");
    mkdirSync(dir);
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 9));
    await until(() => applied.length === 1, "the directory made again to apply");
    expect(limits(applied[0])).toEqual({ a: 9 });
  });

  it("a directory of 130,000 files: a change is checked (the newest time over every file overflowed the stack, an unhandled rejection)", async () => {
    const dir = tempDir();
    for (let i = 0; i < 130_000; i++) writeFileSync(path.join(dir, `f${i}`), "");
    const w = watchDir(dir);
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    // Writing and checking 130,000 files takes ~20 s on a quiet 2-core machine, over a minute
    // when other suites saturate the CPU: the bounds are generous, the assertion is what counts.
    await until(() => w.errors.length > 0, "the change to be checked", 2400);
    expect(w.errors[0]).toMatch(/f0: is empty/);
  }, 240_000);
});

describe("symlink swaps", () => {
  it("RUNTIME_ROOT as a symlink swapped to a new version (current -> v2)", async () => {
    const root = tempDir();
    for (const [v, limit] of [
      ["v1", 1],
      ["v2", 2],
    ] as const) {
      mkdirSync(path.join(root, v, "ratelimit", "config"), { recursive: true });
      writeFileSync(path.join(root, v, "ratelimit", "config", "a.yaml"), envoyFile("a", limit));
    }
    symlinkSync("v1", path.join(root, "current"));
    const w = watchDir(path.join(root, "current", "ratelimit", "config"));
    await sleep(SETTLE);
    symlinkSync("v2", path.join(root, "current.new"));
    renameSync(path.join(root, "current.new"), path.join(root, "current"));
    await until(() => limits(w.last()).a === 2, "swapped to v2");
  });

  it("a Kubernetes ConfigMap volume: files -> ..data/ -> ..<timestamp>/, ..data swapped", async () => {
    const dir = tempDir();
    mkdirSync(path.join(dir, "..2026_1"));
    writeFileSync(path.join(dir, "..2026_1", "a.yaml"), envoyFile("a", 1));
    symlinkSync("..2026_1", path.join(dir, "..data"));
    symlinkSync("..data/a.yaml", path.join(dir, "a.yaml"));
    const w = watchDir(dir);
    await sleep(SETTLE);
    mkdirSync(path.join(dir, "..2026_2"));
    writeFileSync(path.join(dir, "..2026_2", "a.yaml"), envoyFile("a", 6));
    symlinkSync("..2026_2", path.join(dir, "..data_tmp"));
    renameSync(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
    rmSync(path.join(dir, "..2026_1"), { recursive: true });
    await until(() => limits(w.last()).a === 6, "ConfigMap swapped");
    expect(w.errors).toEqual([]);
  });
});

describe("ratekeeper serve --config DIR", () => {
  it("a limit changed in a file of the directory applies to the next gRPC check", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 1));
    const svc = await startService({
      configFile: dir,
      port: 0,
      grpcPort: 0,
      host: "127.0.0.1",
      dashboard: false,
      reloadSettleMs: SETTLE,
      logger: createLogger("silent"),
    });
    const c = rlsClient(svc.grpcPort);
    try {
      const ask = async () =>
        (await c.shouldRateLimit({ domain: "a", descriptors: [{ entries: [{ key: "user", value: "x" }] }], hits_addend: 0 })) as {
          statuses: Array<{ current_limit: { requests_per_unit: number } }>;
        };
      expect((await ask()).statuses[0]?.current_limit.requests_per_unit).toBe(1);
      writeFileSync(path.join(dir, "a.yaml"), envoyFile("a", 40));
      await until(async () => (await ask()).statuses[0]?.current_limit.requests_per_unit === 40, "reloaded");
      expect(svc.metrics.registry.getSingleMetric("ratekeeper_config_reloads_total")).toBeDefined();
    } finally {
      c.close();
      await svc.close();
    }
  });
});

describe("the service process (files parsed in worker threads), envoyproxy/ratelimit's RUNTIME_* layout", () => {
  it("a file added to RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config is served, a bad one refused and logged", async () => {
    const root = tempDir();
    const config = path.join(root, "ratelimit", "config");
    mkdirSync(config, { recursive: true });
    writeFileSync(path.join(config, "a.yaml"), envoyFile("a", 1));
    const svc = await startServiceProcess(["--reload-settle", String(SETTLE)], { RUNTIME_ROOT: root, RUNTIME_SUBDIRECTORY: "ratelimit" });
    const c = rlsClient(svc.grpcPort);
    try {
      const limitOf = async (domain: string) => {
        const r = (await c.shouldRateLimit({ domain, descriptors: [{ entries: [{ key: "user", value: "x" }] }] })) as {
          statuses: Array<{ current_limit: { requests_per_unit: number } | null }>;
        };
        return r.statuses[0]?.current_limit?.requests_per_unit;
      };
      expect(await limitOf("b")).toBeUndefined();
      writeFileSync(path.join(config, "b.yaml"), envoyFile("b", 8));
      await until(async () => (await limitOf("b")) === 8, "b.yaml served");
      writeFileSync(path.join(config, "c.yaml"), "domain: c\ndescriptors: [{ key: user, rate_limit: { unit: fortnight } }]\n");
      await until(() => svc.lines.some((l) => l.includes("rules reload failed") && l.includes("c.yaml")), "c.yaml refused");
      expect(await limitOf("b")).toBe(8);
    } finally {
      c.close();
      await svc.stop();
    }
  });
});
