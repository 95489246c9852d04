/**
 * The OverrideStore contract, run against both backends: a real SQLite file in a temp folder
 * and a real PostgreSQL database created for the run (and dropped after).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresOverrideStore } from "../src/overrides/postgres.js";
import { SqliteOverrideStore } from "../src/overrides/sqlite.js";
import { OverrideConflictError, type Override, type OverrideStore } from "../src/overrides/types.js";
import { createTestDatabase, postgresTestMode, tempDir, type TestDatabase } from "./overrides-support.js";

const pgMode = await postgresTestMode();

const fiveASecond: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 5, window: "1s" }] };
const ov = (key: string, extra: Partial<Override> = {}): Override => ({ domain: "api", key, policy: fiveASecond, ...extra });

interface Backend {
  open(clock: () => number): Promise<OverrideStore>;
  /** A second, independent store object on the same data (another process / instance). */
  reopen(clock: () => number): Promise<OverrideStore>;
}

function contract(name: string, setup: () => Promise<Backend & { teardown(): Promise<void> }>, skip = false): void {
  describe.skipIf(skip)(`OverrideStore contract: ${name}`, () => {
    let backend: Backend & { teardown(): Promise<void> };
    let store: OverrideStore;
    let nowMs = 1_700_000_000_000;
    const clock = () => nowMs;

    beforeAll(async () => {
      backend = await setup();
      store = await backend.open(clock);
    });
    afterAll(async () => {
      await store?.close();
      await backend?.teardown();
    });

    it("creates, reads, updates and deletes; create refuses a live duplicate but replaces an expired one", async () => {
      const created = await store.create(ov("user_id=1", { note: "vip" }), nowMs);
      expect(created.version).toBeGreaterThan(0);
      expect(created.updatedAtMs).toBe(nowMs);
      expect(await store.get("api", "user_id=1")).toMatchObject({
        domain: "api",
        key: "user_id=1",
        policy: fiveASecond,
        note: "vip",
        version: created.version,
      });
      await expect(store.create(ov("user_id=1"), nowMs)).rejects.toBeInstanceOf(OverrideConflictError);

      const updated = await store.update(ov("user_id=1", { policy: "blocked" }));
      expect(updated?.policy).toBe("blocked");
      expect(updated!.version).toBeGreaterThan(created.version);
      expect(await store.update(ov("user_id=404"))).toBeUndefined();
      expect(await store.get("api", "user_id=404")).toBeUndefined();

      await store.put(ov("user_id=2", { expiresAtMs: nowMs + 1000 }));
      await expect(store.create(ov("user_id=2"), nowMs)).rejects.toBeInstanceOf(OverrideConflictError);
      const replaced = await store.create(ov("user_id=2", { policy: "unlimited" }), nowMs + 1000);
      expect(replaced.policy).toBe("unlimited");
      expect((await store.get("api", "user_id=2"))?.expiresAtMs).toBeUndefined();

      expect(await store.delete("api", "user_id=1")).toBe(true);
      expect(await store.delete("api", "user_id=1")).toBe(false);
      expect(await store.get("api", "user_id=1")).toBeUndefined();
      // Deleted keys can be created again.
      expect((await store.create(ov("user_id=1"), nowMs)).policy).toEqual(fiveASecond);
    });

    it("lists in a stable (domain, key) order with keyset paging: no row skipped or repeated, even with writes in between", async () => {
      const many: Override[] = [];
      for (let i = 0; i < 30; i++)
        many.push({ domain: i % 3 === 0 ? "zeta" : "list", key: `k${String(i).padStart(3, "0")}`, policy: "blocked" });
      await store.putMany(many);
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list({ cursor, limit: 7 });
        for (const o of page.items) seen.push(`${o.domain}/${o.key}`);
        cursor = page.nextCursor;
        // A write behind the cursor must not shift later pages.
        if (pages === 1) await store.put({ domain: "api", key: "aaa-late", policy: "blocked" });
        pages++;
      } while (cursor !== undefined && pages < 100);
      const sorted = [...seen].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      expect(seen).toEqual(sorted);
      expect(new Set(seen).size).toBe(seen.length);
      for (const o of many) expect(seen).toContain(`${o.domain}/${o.key}`);

      const zeta = await store.list({ domain: "zeta", limit: 1000 });
      expect(zeta.items.map((o) => o.key)).toEqual(many.filter((o) => o.domain === "zeta").map((o) => o.key));
      expect(zeta.nextCursor).toBeUndefined();
      const prefixed = await store.list({ domain: "list", keyPrefix: "k01" });
      expect(prefixed.items.map((o) => o.key)).toEqual(["k010", "k011", "k013", "k014", "k016", "k017", "k019"]);
      await expect(store.list({ cursor: "not-a-cursor" })).rejects.toThrow(/cursor/);
    });

    it("scans live overrides in primary-key order for full loads (deleted ones left out)", async () => {
      await store.putMany([
        { domain: "scan", key: "b", policy: "blocked" },
        { domain: "scan", key: "a", policy: "blocked" },
        { domain: "scan", key: "c", policy: "unlimited" },
      ]);
      await store.delete("scan", "b");
      const seen: string[] = [];
      let after: [string, string] | undefined;
      for (let i = 0; i < 1000; i++) {
        const page = await store.scan(after, 2);
        for (const o of page) if (o.domain === "scan") seen.push(o.key);
        const last = page[page.length - 1];
        if (!last || page.length < 2) break;
        after = [last.domain, last.key];
      }
      expect(seen).toEqual(["a", "c"]);
    });

    it("leaves expired overrides out of a live listing", async () => {
      await store.put({ domain: "exp", key: "gone", policy: "blocked", expiresAtMs: nowMs - 1 });
      await store.put({ domain: "exp", key: "kept", policy: "blocked", expiresAtMs: nowMs + 60_000 });
      expect((await store.list({ domain: "exp", liveAtMs: nowMs })).items.map((o) => o.key)).toEqual(["kept"]);
      expect((await store.list({ domain: "exp" })).items.map((o) => o.key)).toEqual(["gone", "kept"]);
    });

    it("feeds every change in version order, deletions included", async () => {
      const from = await store.currentVersion();
      await store.put(ov("feed=1"));
      await store.put(ov("feed=2"));
      await store.delete("api", "feed=1");
      const batch = await store.changesSince(from, 100);
      expect(batch.changes.map((c) => [c.key, c.override === undefined ? "deleted" : "put"])).toEqual([
        ["feed=2", "put"],
        ["feed=1", "deleted"],
      ]);
      const versions = batch.changes.map((c) => c.version);
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
      expect(await store.currentVersion()).toBe(versions[versions.length - 1]);
      const paged = await store.changesSince(from, 1);
      expect(paged.changes).toHaveLength(1);
    });

    it("bulk writes with putMany: one call, many rows, the last line for a key wins", async () => {
      const rows: Override[] = [];
      for (let i = 0; i < 12_000; i++) rows.push({ domain: "bulk", key: `user_id=${i}`, policy: i % 2 ? "blocked" : fiveASecond });
      rows.push({ domain: "bulk", key: "user_id=7", policy: "unlimited", note: "last wins" });
      expect(await store.putMany(rows)).toBeGreaterThanOrEqual(12_000);
      expect(await store.get("bulk", "user_id=7")).toMatchObject({ policy: "unlimited", note: "last wins" });
      expect((await store.get("bulk", "user_id=11998"))?.policy).toEqual(fiveASecond);
      let n = 0;
      let cursor: string | undefined;
      do {
        const page = await store.list({ domain: "bulk", cursor, limit: 1000 });
        n += page.items.length;
        cursor = page.nextCursor;
      } while (cursor);
      expect(n).toBe(12_000);
    });

    it("purge turns expired overrides into deletions on the feed, then forgets old deletions and raises the horizon", async () => {
      await store.put({ domain: "purge", key: "a", policy: "blocked", expiresAtMs: nowMs + 10 });
      await store.put({ domain: "purge", key: "b", policy: "blocked" });
      const before = await store.currentVersion();
      nowMs += 10;
      const r = await store.purge(nowMs, 60_000);
      expect(r.expired).toBeGreaterThanOrEqual(1);
      const feed = await store.changesSince(before, 100);
      expect(feed.changes.some((c) => c.domain === "purge" && c.key === "a" && c.override === undefined)).toBe(true);
      expect(await store.get("purge", "a")).toBeUndefined();
      expect(feed.horizon).toBeLessThan(before);

      nowMs += 60_001;
      const r2 = await store.purge(nowMs, 60_000);
      expect(r2.tombstones).toBeGreaterThanOrEqual(1);
      const after = await store.changesSince(0, 100_000);
      expect(after.horizon).toBeGreaterThan(before);
      // Deletions written before the second purge are gone (later ones, e.g. the purge's own, may remain).
      expect(after.changes.some((c) => c.override === undefined && c.version <= before)).toBe(false);
      expect((await store.get("purge", "b"))?.policy).toBe("blocked");
    });

    it("keeps everything across a close and reopen (schema creation is idempotent)", async () => {
      await store.put({
        domain: "durable",
        key: "user_id=241531",
        policy: fiveASecond,
        expiresAtMs: nowMs + 3_600_000,
        note: "5 a second for this user",
      });
      const v = await store.currentVersion();
      await store.close();
      store = await backend.reopen(clock);
      expect(await store.get("durable", "user_id=241531")).toMatchObject({
        policy: fiveASecond,
        note: "5 a second for this user",
        expiresAtMs: nowMs + 3_600_000,
      });
      expect(await store.currentVersion()).toBe(v);
      const next = await store.put({ domain: "durable", key: "x", policy: "blocked" });
      expect(next.version).toBeGreaterThan(v);
    });
  });
}

contract("SQLite file", async () => {
  const tmp = tempDir("store");
  const file = tmp.file("nested/overrides.db");
  return {
    open: async (clock) => new SqliteOverrideStore({ path: file, clock }),
    reopen: async (clock) => new SqliteOverrideStore({ path: file, clock }),
    async teardown() {
      tmp.remove();
    },
  };
});

let db: TestDatabase | undefined;
contract(
  "PostgreSQL",
  async () => {
    db = await createTestDatabase("store");
    const url = db.url;
    return {
      open: (clock) => PostgresOverrideStore.open({ connectionString: url, clock }),
      reopen: (clock) => PostgresOverrideStore.open({ connectionString: url, clock }),
      async teardown() {
        await db?.drop();
      },
    };
  },
  pgMode === "skip",
);
