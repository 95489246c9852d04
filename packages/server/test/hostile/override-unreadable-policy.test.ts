/**
 * An override row whose policy text is not a policy at all (not JSON, or JSON of another shape:
 * a hand edit in the database) must not stop the overrides cache: it loads every other row and
 * follows the change feed as before, and the service treats that row as one whose policy the
 * library refuses (decided by its rule, logged once: override-bad-policy.test.ts). Before, the
 * row's JSON.parse threw inside the cache's load, so the service could not start with that
 * database (and a cache already running failed every read of the feed after it, applying no
 * change again).
 */
import { afterAll, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import { OverrideCache } from "../../src/overrides/cache.js";
import { SqliteOverrideStore } from "../../src/overrides/sqlite.js";
import type { Override } from "../../src/overrides/types.js";
import { sqliteWithEditedRow, tempDir } from "../overrides-support.js";
import { captureLog } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const MSG = "override ignored: the library refuses its stored policy; its key is decided by its rule";
const oneAMinute: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }] };

const tmp = tempDir("override-unreadable");
afterAll(() => tmp.remove());

describe("an override row whose policy text is not a policy", () => {
  it.each([
    ["not JSON", "{oops"],
    ["JSON of another shape", '{"limits": 7}'],
    ["JSON null", "null"],
  ])("(%s) leaves the cache loading the others, and its key to the rule", async (_what, text) => {
    const file = tmp.file(`o-${text.length}.db`);
    await sqliteWithEditedRow(file, text);

    const reopened = new SqliteOverrideStore({ path: file });
    try {
      const cache = await OverrideCache.start(reopened, { purgeIntervalMs: 0, resyncIntervalMs: 0 });
      try {
        const { lines, logger } = captureLog();
        const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "r.yaml"), overrides: cache, logger });
        const check = async (v: string) => (await service.decide({ domain: "d", descriptors: [[{ key: "k", value: v }]] })).statuses[0];
        // k=b: its override (1 a minute) applies.
        expect((await check("b"))?.limit).toBe(1);
        // k=a: the rule's 5 a minute.
        expect(await check("a")).toMatchObject({ limit: 5, explain: { source: "rule" } });
        await check("a");
        const logged = lines.filter((l) => l.msg === MSG);
        expect(logged).toHaveLength(1);
        expect(logged[0]).toMatchObject({ domain: "d", key: "k=a" });
        // The feed is still followed: a change made after is applied.
        await reopened.put({ domain: "d", key: "k=c", policy: oneAMinute });
        await cache.refresh();
        expect((await check("c"))?.limit).toBe(1);
      } finally {
        cache.close();
      }
    } finally {
      await reopened.close();
    }
  });
});
