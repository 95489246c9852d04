/**
 * Two instances sharing one PostgreSQL (each with its own store object: its own pool and its
 * own LISTEN connection, exactly as two service processes): a change made through one reaches
 * the other's cache within a second; a killed LISTEN connection is noticed, reconnected, and
 * what was written meanwhile is not missed.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OverrideCache } from "../src/overrides/cache.js";
import { PostgresOverrideStore, type ListenerEvent } from "../src/overrides/postgres.js";
import type { Override } from "../src/overrides/types.js";
import { until } from "../../../test-support/process.js";
import { createTestDatabase, pgQuery, postgresTestMode, PG_ADMIN_URL, type TestDatabase } from "./overrides-support.js";

const pgMode = await postgresTestMode();
const policy: Override["policy"] = { limits: [{ algorithm: "gcra", limit: 5, window: "1s", burst: 2 }] };

describe.skipIf(pgMode === "skip")("overrides shared through PostgreSQL", () => {
  let db: TestDatabase;
  let a: PostgresOverrideStore;
  let b: PostgresOverrideStore;
  let cacheA: OverrideCache;
  let cacheB: OverrideCache;
  const eventsB: ListenerEvent[] = [];
  const now = () => Date.now();

  beforeAll(async () => {
    db = await createTestDatabase("shared");
    // Both open at once: the migrations take an advisory lock, so they do not race.
    [a, b] = await Promise.all([
      PostgresOverrideStore.open({ connectionString: db.url, applicationName: "rk-test-a" }),
      PostgresOverrideStore.open({
        connectionString: db.url,
        applicationName: "rk-test-b",
        keepaliveIntervalMs: 1000,
        reconnectDelayMs: [50, 500],
        onListenerEvent: (e) => eventsB.push(e),
      }),
    ]);
    // No periodic resync: every change must travel by NOTIFY (or the reconnect resync).
    cacheA = await OverrideCache.start(a, { resyncIntervalMs: 0, purgeIntervalMs: 0 });
    cacheB = await OverrideCache.start(b, { resyncIntervalMs: 0, purgeIntervalMs: 0 });
    await until(() => a.listening && b.listening, "both LISTEN connections up", 1000, 10);
  });

  afterAll(async () => {
    cacheA?.close();
    cacheB?.close();
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it("a change made through one instance reaches the other's cache within one second", async () => {
    await a.put({ domain: "api", key: "user_id=241531", policy, note: "5 a second for this user" });
    expect(cacheA.get("api", "user_id=241531", now())?.policy).toEqual(policy); // read-your-writes
    const tookMs = await until(() => cacheB.get("api", "user_id=241531", now()) !== undefined, "B sees A's override", 1000, 5);
    expect(tookMs).toBeLessThan(1000);
    expect(cacheB.get("api", "user_id=241531", now())).toMatchObject({ policy, note: "5 a second for this user" });

    await b.put({ domain: "api", key: "user_id=241531", policy: "blocked" });
    const back = await until(() => cacheA.get("api", "user_id=241531", now())?.policy === "blocked", "A sees B's update", 1000, 5);
    expect(back).toBeLessThan(1000);

    await a.delete("api", "user_id=241531");
    const gone = await until(() => cacheB.get("api", "user_id=241531", now()) === undefined, "B sees A's delete", 1000, 5);
    expect(gone).toBeLessThan(1000);
  });

  it("a bulk import through one instance reaches the other (one NOTIFY per batch)", async () => {
    const rows: Override[] = [];
    for (let i = 0; i < 20_000; i++) rows.push({ domain: "bulk", key: `ip=10.0.${i >> 8}.${i & 255}`, policy: "blocked" });
    await a.putMany(rows);
    await until(() => cacheB.get("bulk", "ip=10.0.78.31", now()) !== undefined && cacheB.size >= 20_000, "B holds all 20000", 2000, 10);
    expect(cacheB.version).toBe(cacheA.version);
  });

  it("notices a killed LISTEN connection, reconnects, and catches up on what it missed", async () => {
    const pid = b.listenBackendPid;
    expect(pid).toBeTypeOf("number");
    const lostBefore = eventsB.filter((e) => e.type === "lost").length;
    const [row] = await pgQuery<{ ok: boolean }>(PG_ADMIN_URL, "SELECT pg_terminate_backend($1) AS ok", [pid]);
    expect(row?.ok).toBe(true);
    // Written while B's notification connection is down (or coming back): its NOTIFY may be lost.
    await a.put({ domain: "api", key: "during-outage", policy: "unlimited" });
    await until(() => eventsB.filter((e) => e.type === "lost").length > lostBefore, "B notices the loss", 1000, 10);
    await until(
      () => b.listening && b.listenBackendPid !== undefined && b.listenBackendPid !== pid,
      "B reconnects with a new backend",
      1000,
      10,
    );
    await until(() => cacheB.get("api", "during-outage", now())?.policy === "unlimited", "B catches up on the missed change", 1000, 10);
    const [backend] = await pgQuery<{ application_name: string }>(
      PG_ADMIN_URL,
      "SELECT application_name FROM pg_stat_activity WHERE pid = $1",
      [b.listenBackendPid],
    );
    expect(backend?.application_name).toBe("rk-test-b-listen");

    // And the restored connection carries notifications again.
    await a.put({ domain: "api", key: "after-outage", policy: "blocked" });
    const tookMs = await until(() => cacheB.get("api", "after-outage", now()) !== undefined, "B sees a change after reconnecting", 1000, 5);
    expect(tookMs).toBeLessThan(1000);
    expect(eventsB.some((e) => e.type === "connected" && e.reconnects >= 1)).toBe(true);
  });

  it("notices a connection that goes silent (no FIN, no error) through the keepalive query", async () => {
    // A TCP proxy in front of PostgreSQL that can stop forwarding: what a dead NAT entry or a
    // pulled cable looks like to the client. Only the keepalive query can notice it.
    const pgUrl = new URL(db.url);
    let frozen = false;
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(pgUrl.port || 5432), pgUrl.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("error", () => s.destroy());
        s.on("close", () => sockets.delete(s));
      }
      client.on("data", (d) => void (frozen || upstream.write(d)));
      upstream.on("data", (d) => void (frozen || client.write(d)));
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const viaProxy = new URL(db.url);
    viaProxy.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const events: ListenerEvent[] = [];
    const c = await PostgresOverrideStore.open({
      connectionString: viaProxy.toString(),
      keepaliveIntervalMs: 200,
      keepaliveTimeoutMs: 300,
      reconnectDelayMs: [50, 200],
      onListenerEvent: (e) => events.push(e),
    });
    const cacheC = await OverrideCache.start(c, { resyncIntervalMs: 0, purgeIntervalMs: 0 });
    try {
      await until(() => c.listening, "C listens", 1000, 10);
      const firstPid = c.listenBackendPid;
      frozen = true; // every byte is now dropped; no socket is closed
      await until(() => events.some((e) => e.type === "lost"), "the keepalive notices the silence", 1000, 10);
      expect(events.find((e) => e.type === "lost")).toMatchObject({
        error: expect.objectContaining({ message: expect.stringMatching(/keepalive/) }),
      });
      await a.put({ domain: "api", key: "during-silence", policy: "blocked" });
      // The silent sockets are abandoned; new connections through the proxy work again.
      for (const s of sockets) s.destroy();
      frozen = false;
      await until(() => c.listening && c.listenBackendPid !== firstPid, "C reconnects", 1000, 10);
      await until(() => cacheC.get("api", "during-silence", now())?.policy === "blocked", "C catches up", 1000, 10);
    } finally {
      frozen = false;
      cacheC.close();
      await c.close();
      for (const s of sockets) s.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });
});
