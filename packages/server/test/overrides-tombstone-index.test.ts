/**
 * The minute's purge forgets tombstones older than the retention (`deleted AND updated_at_ms <
 * cutoff`). Without an index for that, it read the whole table every minute on every instance:
 * with 1,000,000 overrides about 55-63 ms of SQLite work on the event loop (better-sqlite3 is
 * synchronous: every decision waits) and 80-120 ms of a PostgreSQL scan under the write lock
 * that every admin write waits on. Both schemas now carry a partial index on tombstones; a
 * store made by an earlier version gets it when opened.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openOverrideStore } from "../src/overrides/open.js";
import { createTestDatabase, postgresTestMode, tempDir, type TestDatabase } from "./overrides-support.js";

const pgMode = await postgresTestMode();

describe("the tombstone purge reads tombstones only", () => {
  const dir = tempDir("tombstone-index");
  afterAll(() => dir.remove());

  it("SQLite: the purge's tombstone query searches an index, on a new store and on one made at schema 1", async () => {
    for (const name of ["new.db", "old.db"]) {
      const file = dir.file(name);
      if (name === "old.db") {
        // As an earlier version left it: schema 1, no tombstone index.
        await (await openOverrideStore(`sqlite:${file}`)).close();
        const db = new Database(file);
        db.exec("DROP INDEX IF EXISTS ratekeeper_overrides_tombstones");
        db.pragma("user_version = 1");
        db.close();
      }
      const store = await openOverrideStore(`sqlite:${file}`);
      await store.close();
      const db = new Database(file, { readonly: true });
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT max(version) AS v, count(*) AS n FROM ratekeeper_overrides WHERE deleted = 1 AND updated_at_ms < ?`,
        )
        .all(0) as { detail: string }[];
      db.close();
      expect(
        plan.map((r) => r.detail),
        name,
      ).toEqual([expect.stringMatching(/^SEARCH ratekeeper_overrides USING (COVERING )?INDEX ratekeeper_overrides_tombstones/)]);
    }
  });

  describe.skipIf(pgMode === "skip")("PostgreSQL", () => {
    let db: TestDatabase;
    afterAll(async () => {
      await db?.drop();
    });

    it("the purge's tombstone delete needs no sequential scan, on a new store and on one made at schema 1", async () => {
      db = await createTestDatabase("tombidx");
      const plan = async () => {
        const c = new pg.Client({ connectionString: db.url });
        await c.connect();
        try {
          await c.query("SET enable_seqscan = off");
          const { rows } = await c.query<{ "QUERY PLAN": string }>(
            "EXPLAIN DELETE FROM ratekeeper_overrides WHERE deleted AND updated_at_ms < 0 RETURNING version",
          );
          return rows.map((r) => r["QUERY PLAN"]).join("\n");
        } finally {
          await c.end();
        }
      };
      await (await openOverrideStore(db.url)).close();
      expect(await plan()).not.toMatch(/Seq Scan/);
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      await c.query("DROP INDEX IF EXISTS ratekeeper_overrides_tombstones; UPDATE ratekeeper_meta SET value = 1 WHERE name = 'schema'");
      await c.end();
      expect(await plan()).toMatch(/Seq Scan/); // the control: without the index, the table is read
      await (await openOverrideStore(db.url)).close();
      expect(await plan()).not.toMatch(/Seq Scan/);
    });
  });
});
