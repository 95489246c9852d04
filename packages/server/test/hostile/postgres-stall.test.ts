/**
 * One instance stalls in the middle of an overrides write (its process stopped, a GC pause, a
 * network partition: its connection stays open but sends nothing more) while it holds the write
 * lock that every write takes (postgres-schema.ts). The other instances must still write once
 * the stalled transaction has been idle for the store's query timeout, not wait on the lock
 * until TCP keepalive gives up on the stalled client (two hours by default).
 */
import net from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { PostgresOverrideStore } from "../../src/overrides/postgres.js";
import { createTestDatabase, postgresTestMode, type TestDatabase } from "../overrides-support.js";

const pgMode = await postgresTestMode();

/**
 * A TCP proxy in front of PostgreSQL that, once a client sends bytes containing `freezeOn`, drops
 * everything that client sends or receives from then on, sockets left open: a stalled client.
 */
async function stallingProxy(
  target: URL,
  freezeOn: string,
  /** Once stalled, leave the client's socket open even when the server closes its end: a stopped server. */
  serverStopped = false,
): Promise<{ url: string; frozen(): boolean; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let frozen = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => s.destroy());
      s.on("close", () => sockets.delete(s));
    }
    let stalled = false;
    client.on("data", (d: Buffer) => {
      if (!stalled && d.includes(freezeOn)) stalled = frozen = true;
      if (!stalled) upstream.write(d);
    });
    upstream.on("data", (d: Buffer) => void (stalled || client.write(d)));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => {
      if (!(stalled && serverStopped)) client.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = new URL(target);
  url.host = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url: url.toString(),
    frozen: () => frozen,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

describe.skipIf(pgMode === "skip")("PostgreSQL overrides: an instance stalled inside a write", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase("stall");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("does not hold the write lock for good: another instance's write succeeds", async () => {
    const proxy = await stallingProxy(new URL(db.url), "INSERT INTO ratekeeper_overrides");
    // A: its writes stall after BEGIN and the lock, at its INSERT. A short query timeout, so the
    // server gives up on its idle transaction soon.
    const a = await PostgresOverrideStore.open({ connectionString: proxy.url, queryTimeoutMs: 1000 });
    // B: a longer query timeout, so its write can wait for the lock to be released.
    const b = await PostgresOverrideStore.open({ connectionString: db.url, queryTimeoutMs: 10_000 });
    try {
      const stalled = a.put({ domain: "api", key: "user_id=a", policy: "blocked" }).then(
        () => "written",
        (e: unknown) => `failed: ${(e as Error).message}`,
      );
      while (!proxy.frozen()) await new Promise((r) => setTimeout(r, 10));
      const r = await b.put({ domain: "api", key: "user_id=b", policy: "blocked" }).then(
        (o) => `written at version ${o.version > 0}`,
        (e: unknown) => `failed: ${(e as Error).message}`,
      );
      expect(r).toBe("written at version true");
      expect(await b.get("api", "user_id=b")).toMatchObject({ policy: "blocked" });
      expect(await b.get("api", "user_id=a")).toBeUndefined();
      await proxy.close();
      expect(await stalled).toMatch(/^failed/);
    } finally {
      await proxy.close();
      await b.close();
      await a.close().catch(() => undefined);
    }
  });

  it("a write whose statement got no answer fails after one query timeout: no ROLLBACK waiting behind it", async () => {
    // The whole server stalls at the write's INSERT (SIGSTOP). A ROLLBACK sent on that connection
    // would wait a second query timeout for an answer that cannot come (70 s with the defaults,
    // past a proxy's 60 s), then the 503.
    const proxy = await stallingProxy(new URL(db.url), "INSERT INTO ratekeeper_overrides", true);
    const a = await PostgresOverrideStore.open({ connectionString: proxy.url, queryTimeoutMs: 200 });
    // Calls through: only records the statements sent.
    const spy = vi.spyOn(pg.Client.prototype, "query");
    try {
      const r = await a.put({ domain: "api", key: "user_id=frozen", policy: "blocked" }).then(
        () => "written",
        (e: unknown) => `failed: ${(e as Error).message}`,
      );
      expect(r).toBe("failed: Query read timeout");
      // pg queues a query behind the one in flight, so it would not even reach the socket.
      expect(spy.mock.calls.filter((args) => args[0] === "ROLLBACK")).toEqual([]);
    } finally {
      spy.mockRestore();
      await proxy.close();
      await a.close().catch(() => undefined);
    }
  });
});
