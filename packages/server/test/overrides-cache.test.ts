/**
 * The in-memory override cache over a real SQLite file: paged load, read-your-writes, another
 * process's writes found by polling, expiry with a manual clock, and the full reload when
 * deletions it never saw were forgotten.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OverrideCache } from "../src/overrides/cache.js";
import { SqliteOverrideStore } from "../src/overrides/sqlite.js";
import type { Override } from "../src/overrides/types.js";
import { until } from "../../../test-support/process.js";
import { tempDir } from "./overrides-support.js";

const policy: Override["policy"] = { limits: [{ algorithm: "token-bucket", limit: 5, window: "1s", capacity: 10 }] };

describe("OverrideCache over SQLite", () => {
  let tmp: ReturnType<typeof tempDir>;
  let file: string;
  let nowMs: number;
  const clock = () => nowMs;
  const closers: (() => unknown)[] = [];

  beforeEach(() => {
    tmp = tempDir("cache");
    file = tmp.file("overrides.db");
    nowMs = 1_800_000_000_000;
  });
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    tmp.remove();
  });

  function open(pollIntervalMs = 3_600_000): SqliteOverrideStore {
    const s = new SqliteOverrideStore({ path: file, clock, pollIntervalMs });
    closers.push(() => s.close());
    return s;
  }
  async function cacheOf(store: SqliteOverrideStore, pageSize = 1000): Promise<OverrideCache> {
    const c = await OverrideCache.start(store, { clock, pageSize, purgeIntervalMs: 0, resyncIntervalMs: 0 });
    closers.push(() => c.close());
    return c;
  }

  it("loads every override page by page, and answers misses without the database", async () => {
    const store = open();
    const rows: Override[] = [];
    for (let i = 0; i < 5_500; i++) rows.push({ domain: i % 2 ? "api" : "web", key: `user_id=${i}`, policy });
    await store.putMany(rows);
    const cache = await cacheOf(store, 1000);
    expect(cache.size).toBe(5_500);
    expect(cache.fullLoads).toBe(1);
    expect(cache.version).toBe(await store.currentVersion());
    expect(cache.get("api", "user_id=5499", nowMs)?.policy).toEqual(policy);
    expect(cache.get("web", "user_id=5499", nowMs)).toBeUndefined();
    expect(cache.get("nope", "user_id=1", nowMs)).toBeUndefined();
    // Same policy text, one shared object (a million overrides must not hold a million copies).
    expect(cache.get("api", "user_id=1", nowMs)?.policy).toBe(cache.get("api", "user_id=3", nowMs)?.policy);
  });

  it("sees its own store's writes as soon as the write resolves (read-your-writes)", async () => {
    const store = open();
    const cache = await cacheOf(store);
    // A remembered miss (the front map keeps recent answers) must not hide a later write.
    expect(cache.get("api", "user_id=241531", nowMs)).toBeUndefined();
    await store.put({ domain: "api", key: "user_id=241531", policy });
    expect(cache.get("api", "user_id=241531", nowMs)?.policy).toEqual(policy);
    await store.put({ domain: "api", key: "user_id=241531", policy: "blocked" });
    expect(cache.get("api", "user_id=241531", nowMs)?.policy).toBe("blocked");
    await store.delete("api", "user_id=241531");
    expect(cache.get("api", "user_id=241531", nowMs)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("picks up another process's writes to the file by polling the version", async () => {
    const mine = open(20);
    const cache = await cacheOf(mine);
    const other = open(); // another process, e.g. `ratekeeper overrides import`
    await other.putMany([
      { domain: "api", key: "imported=1", policy: "unlimited" },
      { domain: "api", key: "imported=2", policy: "blocked" },
    ]);
    expect(cache.get("api", "imported=1", nowMs)).toBeUndefined(); // not yet: no signal crossed processes
    await until(() => cache.get("api", "imported=2", nowMs)?.policy === "blocked", "the import reaches the cache", 1000, 10);
    expect(cache.size).toBe(2);
  });

  it("keeps answering right after the front map of recent keys fills and is dropped", async () => {
    const store = open();
    const rows: Override[] = [];
    for (let i = 0; i < 20_000; i += 2) rows.push({ domain: "api", key: `k${i}`, policy: "blocked" });
    await store.putMany(rows);
    const cache = await cacheOf(store);
    const wrong: string[] = [];
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 20_000; i++)
        if (cache.get("api", `k${i}`, nowMs)?.policy !== (i % 2 === 0 ? "blocked" : undefined)) wrong.push(`k${i}`);
    }
    expect(wrong).toEqual([]);
    await store.put({ domain: "api", key: "k1", policy: "unlimited" });
    await store.delete("api", "k19998");
    expect(cache.get("api", "k1", nowMs)?.policy).toBe("unlimited");
    expect(cache.get("api", "k19998", nowMs)).toBeUndefined();
  });

  it("ignores expired overrides on lookup and purges them (manual clock)", async () => {
    const store = open();
    const cache = await cacheOf(store);
    await store.put({ domain: "api", key: "boost", policy: "unlimited", expiresAtMs: nowMs + 60_000 });
    await store.put({ domain: "api", key: "block", policy: "blocked", expiresAtMs: nowMs + 120_000 });
    await store.put({ domain: "api", key: "forever", policy });
    expect(cache.get("api", "boost", nowMs + 59_999)?.policy).toBe("unlimited");
    expect(cache.get("api", "boost", nowMs + 60_000)).toBeUndefined();
    expect(cache.get("api", "block", nowMs + 60_000)?.policy).toBe("blocked");

    nowMs += 60_000;
    await cache.purge();
    expect(cache.size).toBe(2);
    expect(await store.get("api", "boost")).toBeUndefined(); // the store purged too
    expect(cache.get("api", "forever", nowMs + 10 ** 9)?.policy).toEqual(policy);

    // An override written already expired is not held at all.
    await store.put({ domain: "api", key: "stale", policy: "blocked", expiresAtMs: nowMs - 1 });
    expect(cache.size).toBe(2);
  });

  it("rebuilds from scratch when deletions it never saw were forgotten (horizon passed)", async () => {
    const mine = open(); // polls once an hour: it will miss the other process's delete
    await mine.putMany([
      { domain: "api", key: "a", policy: "blocked" },
      { domain: "api", key: "b", policy: "blocked" },
    ]);
    const cache = await cacheOf(mine);
    expect(cache.size).toBe(2);
    const other = open();
    await other.delete("api", "a");
    await other.put({ domain: "api", key: "c", policy: "unlimited" });
    nowMs += 10;
    await other.purge(nowMs, 0); // forget the deletion of "a" at once
    expect(cache.get("api", "a", nowMs)?.policy).toBe("blocked"); // stale until it reads the feed
    await cache.refresh();
    expect(cache.get("api", "a", nowMs)).toBeUndefined();
    expect(cache.get("api", "c", nowMs)?.policy).toBe("unlimited");
    expect(cache.size).toBe(2);
    expect(cache.version).toBe(await mine.currentVersion());
    expect(cache.fullLoads).toBe(2);
  });
});
