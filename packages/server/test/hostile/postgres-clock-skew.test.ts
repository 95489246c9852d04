/**
 * Instances sharing one PostgreSQL store whose clocks disagree. Each instance ignores an override
 * once its own clock passes the expiry; but the periodic purge turns expired overrides into
 * deletions for every instance, so one instance with a clock running ahead must not end, for
 * all the others, a temporary block or boost that has not yet expired (the database's clock
 * is the one they share, as the Redis store uses the Redis server's TIME).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OverrideCache } from "../../src/overrides/cache.js";
import { PostgresOverrideStore } from "../../src/overrides/postgres.js";
import { createTestDatabase, postgresTestMode, type TestDatabase } from "../overrides-support.js";

const pgMode = await postgresTestMode();
const AHEAD_MS = 10 * 60_000;

describe.skipIf(pgMode === "skip")("PostgreSQL overrides: an instance whose clock runs ahead", () => {
  let db: TestDatabase;
  let a: PostgresOverrideStore;
  let b: PostgresOverrideStore;
  let cacheA: OverrideCache;
  const fast = () => Date.now() + AHEAD_MS;

  beforeAll(async () => {
    db = await createTestDatabase("skew");
    a = await PostgresOverrideStore.open({ connectionString: db.url });
    b = await PostgresOverrideStore.open({ connectionString: db.url, clock: fast });
    cacheA = await OverrideCache.start(a, { resyncIntervalMs: 0, purgeIntervalMs: 0 });
  });
  afterAll(async () => {
    cacheA?.close();
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it("does not purge, for every instance, an override that expires after the database's now", async () => {
    const now = Date.now();
    await a.put({ domain: "api", key: "user_id=blocked-5m", policy: "blocked", expiresAtMs: now + 5 * 60_000 });
    await a.put({ domain: "api", key: "user_id=expired", policy: "blocked", expiresAtMs: now - 1000 });
    // B's periodic purge, at B's clock: 10 minutes ahead.
    await b.purge(fast(), 3_600_000);
    await cacheA.refresh();
    expect(await a.get("api", "user_id=expired")).toBeUndefined();
    expect(await a.get("api", "user_id=blocked-5m")).toMatchObject({ policy: "blocked" });
    expect(cacheA.get("api", "user_id=blocked-5m", Date.now())?.policy).toBe("blocked");
  });
});
