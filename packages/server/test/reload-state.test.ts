/**
 * What a rules reload does to limit state and to the service's memory: a policy unchanged keeps
 * its counts; a policy changed (another algorithm, limit or window) starts afresh, never reading
 * the old algorithm's state as its own; and the limiters of policies no longer in the rules are
 * let go, so a service reloaded many times (limits tuned by a tool every minute, a reload storm)
 * holds the limiters of the rules in force, not of every policy it ever had (about 2 KB each).
 * And a change made while the service starts (after its rules were read, before it watches them:
 * up to 5 s while it waits for Redis) is applied, not taken for the rules in force.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MemoryStore } from "ratekeeper";
import { describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { parseRules } from "../src/config/load.js";
import { createLogger } from "../src/log.js";
import { startService } from "../src/server.js";
import { DecisionService } from "../src/service/decide.js";

/** Rules with `user` in domain `d` under `policy` (YAML flow map), plus `n` tenants with limits from `base`. */
function rules(policy: string, n = 0, base = 1): ReturnType<typeof parseRules> {
  let text = `domains:\n  - domain: d\n    descriptors:\n      - { key: user, ${policy} }\n`;
  for (let i = 0; i < n; i++) text += `      - { key: tenant, value: t${i}, algorithm: gcra, limit: ${base + i}, window: 1m }\n`;
  return parseRules(text, "rules.yaml");
}

const check = (svc: DecisionService) =>
  svc.decide({ domain: "d", descriptors: [[{ key: "user", value: "u1" }]] }).then((r) => r.statuses[0]!);

describe("state across reloads", () => {
  it("an unchanged policy keeps its counts; a changed algorithm starts afresh", async () => {
    const fixed = "algorithm: fixed-window, limit: 5, window: 1h";
    const svc = new DecisionService({ store: new MemoryStore(), rules: rules(fixed) });
    for (let i = 0; i < 3; i++) await check(svc);
    svc.setRules(rules(fixed, 3));
    expect((await check(svc)).remaining).toBe(1);
    svc.setRules(rules("algorithm: token-bucket, limit: 5, window: 1h"));
    expect((await check(svc)).remaining).toBe(4);
  });

  it("the limiters of policies gone from the rules are let go; a policy back again finds its counts", async () => {
    const fixed = "algorithm: fixed-window, limit: 5, window: 1h";
    const first = rules(fixed, 50, 1);
    const svc = new DecisionService({ store: new MemoryStore(), rules: first });
    await check(svc);
    await check(svc);
    const tenant = first.rules.find((r) => r.id.endsWith("tenant=t7"))!;
    const before = svc.limiterFor(tenant.policyId, tenant.specs);
    // Reloads with every tenant's limit changed: their old policies are in no rule any more.
    for (let round = 1; round <= 5; round++) svc.setRules(rules(fixed, 50, 1 + round * 100));
    svc.setRules(first);
    expect(svc.limiterFor(tenant.policyId, tenant.specs)).not.toBe(before);
    expect((await check(svc)).remaining).toBe(2);
  });
});

describe("a change made while the service starts", () => {
  it.each(["file", "directory"])("is applied (a %s)", async (kind) => {
    const dir = mkdtempSync(path.join(tmpdir(), "rk-reload-state-"));
    const file = path.join(dir, "rules.yaml");
    const write = (limit: number) =>
      writeFileSync(file, `domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`);
    write(3);
    // No Redis there: the start waits its 5 s for it, after the rules were read.
    const starting = startService({
      configFile: kind === "file" ? file : dir,
      redisUrl: "redis://127.0.0.1:1",
      port: 0,
      grpcPort: 0,
      host: "127.0.0.1",
      dashboard: false,
      reloadSettleMs: 100,
      logger: createLogger("silent"),
    });
    await new Promise((r) => setTimeout(r, 1000));
    write(7);
    const svc = await starting;
    try {
      const limit = () => svc.service.rules.rules[0]?.limits[0]?.limit;
      await until(() => limit() === 7, "the change made during the start to apply", 40);
    } finally {
      await svc.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
