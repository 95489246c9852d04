/**
 * A rules file is a trust boundary: within --max-rules-bytes, a hostile or broken file (a 4 MiB
 * YAML flow list of two million numbers) parses for a minute and builds gigabytes of heap. The
 * reload's parse worker is bounded in time and heap (config/parse-budget.ts): a file past either
 * is refused with a RulesError naming it, the rules in force stay, and a later good file applies.
 * The worker only runs from the compiled modules (from the sources the parse runs in this thread,
 * unbounded), so these tests load packages/server/dist, with budgets shrunk through the reload's
 * internal `parseBudget` option rather than waiting out the real ones.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { until } from "../../../../test-support/process.js";
import type * as BudgetModule from "../../src/config/parse-budget.js";
import type * as ThreadModule from "../../src/config/parse-thread.js";
import type * as DirModule from "../../src/config/reload-dir.js";
import type * as ReloadModule from "../../src/config/reload.js";
import type { Rules } from "../../src/config/rules.js";
import { ROOT } from "../support.js";
import { scratch } from "../scratch.js";

/** A compiled module of packages/server/dist/config (where the parse worker exists). */
async function built<T>(name: string): Promise<T> {
  return (await import(pathToFileURL(path.join(ROOT, "packages/server/dist/config", name)).href)) as T;
}

const MIB = 1024 * 1024;

/** Ordinary rules: domain `t` with `user` at `limit` an hour, then domains of one descriptor each up to `bytes`. */
function rules(limit: number, bytes = 0): string {
  let s = `domains:\n  - domain: t\n    descriptors:\n      - key: user\n        algorithm: fixed-window\n        limit: ${limit}\n        window: 1h\n`;
  for (let i = 0; s.length < bytes - 120; i++)
    s += `  - domain: x${i}\n    descriptors:\n      - key: user_${i}\n        algorithm: gcra\n        limit: ${(i % 500) + 1}\n        window: 1m\n        burst: 3\n`;
  return s;
}

/** The hostile file: a 4 MiB flow list of about two million numbers (over 20 s to parse). */
const flowList = (): string => `domains: [${"1,".repeat((4 * MIB - 16) / 2)}1]\n`;

const limitOf = (r: Rules): number | undefined => JSON.stringify(r.rules).match(/"limit":(\d+)/)?.[1] as never;

const { tempDir, stops } = scratch("parse-budget");

/** What a watch applied and refused. */
function collect() {
  const applied: Rules[] = [];
  const errors: Error[] = [];
  return { applied, errors, onReload: (r: Rules) => applied.push(r), onError: (e: Error) => errors.push(e) };
}

const SLOW = { timeoutMs: 2000, heapMb: 4096 };

describe("the rules reload's parse budget", () => {
  it("a file slower to parse than the budget is stopped and refused naming it; the rules stay until a good file applies", async () => {
    const { watchRules } = await built<typeof ReloadModule>("reload.js");
    const file = path.join(tempDir(), "rules.yaml");
    writeFileSync(file, rules(3));
    const seen = collect();
    stops.push(watchRules(file, { ...seen, settleMs: 100, pollIntervalMs: 0, parseBudget: SLOW }));
    writeFileSync(file, flowList());
    await until(() => seen.errors.length > 0, "the slow file to be refused", 600);
    expect(seen.errors[0]!.name).toBe("RulesError");
    expect(seen.errors[0]!.message).toMatch(new RegExp(`^${file}: took longer than 2 s to parse: stopped and refused \\(`));
    expect(seen.errors[0]!.message).toContain("--max-rules-bytes");
    expect(seen.applied).toHaveLength(0);

    writeFileSync(file, rules(7));
    await until(() => seen.applied.length > 0, "the good file to apply", 600);
    expect(limitOf(seen.applied[0]!)).toBe("7");
    expect(seen.errors).toHaveLength(1);
  });

  it("in a directory, the slow file is refused naming it; the directory applies once it is fixed", async () => {
    const { watchRulesDir } = await built<typeof DirModule>("reload-dir.js");
    const dir = tempDir();
    writeFileSync(path.join(dir, "a.yaml"), rules(3));
    const seen = collect();
    stops.push(watchRulesDir(dir, { ...seen, settleMs: 100, pollIntervalMs: 0, parseBudget: SLOW }));
    const bad = path.join(dir, "b.yaml");
    writeFileSync(bad, flowList());
    await until(() => seen.errors.length > 0, "the slow file to be refused", 600);
    expect(seen.errors[0]!.message).toMatch(new RegExp(`^${bad}: took longer than 2 s to parse`));
    expect(seen.applied).toHaveLength(0);

    writeFileSync(bad, rules(1).replace("domain: t", "domain: b"));
    await until(() => seen.applied.length > 0, "the fixed directory to apply", 600);
    expect([...seen.applied[0]!.domains.keys()].sort()).toEqual(["b", "t"]);
    expect(seen.errors).toHaveLength(1);
  });

  it("a parse past its heap is stopped (ERR_WORKER_OUT_OF_MEMORY) and refused naming the file; the next parse runs", async () => {
    const { parseOffThread } = await built<typeof ThreadModule>("parse-thread.js");
    const budget = { timeoutMs: 120_000, heapMb: 32 };
    // 1 MiB of ordinary rules needs about 75 MB of heap.
    const big = parseOffThread(rules(5, MIB), "big.yaml", budget).rules;
    await expect(big).rejects.toMatchObject({ name: "RulesError", file: "big.yaml" });
    await expect(big).rejects.toThrow(/^big\.yaml: needed more than 32 MB of memory to parse: stopped and refused \(/);
    expect(limitOf(await parseOffThread(rules(9), "small.yaml", budget).rules)).toBe("9");
  });

  it("the default budget (80 s, 1 GB at 4 MiB) has room for 4 MiB of ordinary rules", async () => {
    const { parseBudget } = await built<typeof BudgetModule>("parse-budget.js");
    const { parseOffThread } = await built<typeof ThreadModule>("parse-thread.js");
    expect(parseBudget(4 * MIB)).toEqual({ timeoutMs: 80_000, heapMb: 1024 });
    expect(parseBudget(1000)).toEqual({ timeoutMs: 30_000, heapMb: 64 });
    // The heap only: time is not asserted here (a saturated machine may be slow).
    const text = rules(4, 4 * MIB);
    const r = await parseOffThread(text, "four.yaml", { ...parseBudget(4 * MIB), timeoutMs: 600_000 }).rules;
    expect(r.domains.size).toBeGreaterThan(30_000);
  }, 300_000);
});
