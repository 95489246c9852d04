/**
 * The dashboard's overrides listing with a row whose stored policy is not a policy (a hand edit
 * in the database: text that is not JSON, since af5dd59 read as limits the library refuses, or
 * JSON of another shape). The service decides that row's key by its rule and logs the row
 * (override-unreadable-policy.test.ts); the dashboard must still list every override, that row
 * with its stored text, rather than fail the whole listing ("dashboard: the overrides listing
 * failed", an error that blames the overrides database and hides every other override).
 */
import { afterAll, describe, expect, it } from "vitest";
import type { Rules } from "../../src/config/rules.js";
import { DashboardStats } from "../../src/dashboard/stats.js";
import { StateBuilder } from "../../src/dashboard/state.js";
import { SqliteOverrideStore } from "../../src/overrides/sqlite.js";
import { sqliteWithEditedRow, tempDir } from "../overrides-support.js";

const tmp = tempDir("dashboard-unreadable");
afterAll(() => tmp.remove());

describe("the dashboard's overrides listing, with a row whose policy is not a policy", () => {
  it.each([
    ["not JSON", "{oops", "not a policy: {oops"],
    ["JSON of another shape", '{"limits": 7}', "not a policy: 7"],
    ["JSON with limits that are not objects", '{"limits": [null]}', "not a policy: [null]"],
  ])("(%s) lists every override, that row with its stored text", async (_what, text, shown) => {
    const file = tmp.file(`o-${text.length}.db`);
    await sqliteWithEditedRow(file, text);

    const reopened = new SqliteOverrideStore({ path: file });
    try {
      const warned: unknown[] = [];
      const rules = { source: "test", domains: new Map(), rules: [], policies: new Map(), pools: new Map() } as unknown as Rules;
      const b = new StateBuilder({
        stats: new DashboardStats(0),
        rules: () => rules,
        overrides: reopened,
        storeHealth: () => ({ kind: "memory", status: "ready", breaker: null }),
        logger: { warn: (...args: unknown[]) => void warned.push(args) },
      });
      const s = JSON.parse(await b.json()) as { overrides: { error: string | null; items: { key: string; policy: string }[] } };
      expect(s.overrides.error).toBeNull();
      expect(warned).toEqual([]);
      const byKey = Object.fromEntries(s.overrides.items.map((i) => [i.key, i.policy]));
      expect(byKey["k=b"]).toBe("fixed-window 1 per 1m");
      expect(byKey["k=a"]).toBe(shown);
    } finally {
      await reopened.close();
    }
  });
});
