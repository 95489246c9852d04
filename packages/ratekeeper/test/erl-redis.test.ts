/**
 * express-rate-limit on Redis (its rate-limit-redis store) and `ratekeeper/express` on
 * ratekeeper's RedisStore, one real redis-server for both: the same options and requests give
 * the same answers, and resetKey / getKey act on the shared counters. An express-rate-limit store
 * given to ratekeeper is refused, saying what to write instead.
 */
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import express from "express";
import { rateLimit as erl } from "express-rate-limit";
import { Redis } from "ioredis";
import { RedisStore as ErlRedisStore, type RedisReply } from "rate-limit-redis";
import { afterAll, afterEach, beforeAll, expect, it, vi } from "vitest";
import { describeRedis, startRedis, type RedisHandle } from "../../../test-support/redis.js";
import { rateLimit as ours } from "../src/adapters/express.js";
import { RedisStore } from "../src/stores/redis/index.js";
import { httpRequest, type Send } from "./http-support.js";

type Limiter = express.RequestHandler & { resetKey(key: string): unknown; getKey(key: string): unknown };

describeRedis("express-rate-limit's options on Redis, side by side", () => {
  let redis: RedisHandle;
  let client: Redis;
  const servers: Server[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.port, redis.host);
    vi.useFakeTimers({ toFake: ["Date"], now: new Date("2026-11-24T12:00:00.250Z") });
  });
  afterAll(async () => {
    vi.useRealTimers();
    client.disconnect();
    await redis.stop();
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  async function start(limiter: Limiter): Promise<string> {
    const app = express();
    app.use(limiter);
    app.get("/{*any}", (req, res) => res.json((req as unknown as Record<string, unknown>).rateLimit ?? null));
    const server = createServer(app);
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  const observe = async (url: string, send: Send = {}) => {
    const r = await httpRequest(url, send);
    const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => /ratelimit|retry-after/.test(k)));
    // Redis's own clock runs on between the two requests: reset times agree to the second, not the millisecond.
    return { status: r.status, headers, body: r.body.replace(/(\d\d:\d\d:\d\d)\.\d{3}Z/g, "$1Z") };
  };

  it("limit 3 per minute, draft-7 and legacy headers; then getKey, resetKey", async () => {
    const options = { windowMs: 60_000, limit: 3, standardHeaders: "draft-7" } as const;
    const theirs = erl({
      ...options,
      store: new ErlRedisStore({
        prefix: "erl:",
        sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<RedisReply>,
      }),
    }) as unknown as Limiter;
    const mine = ours({ ...options, store: new RedisStore({ client }) }) as unknown as Limiter;
    const a = await start(theirs);
    const b = await start(mine);
    for (let i = 0; i < 5; i++) expect(await observe(b)).toEqual(await observe(a));
    expect(((await mine.getKey("127.0.0.1")) as { totalHits: number }).totalHits).toBe(3);
    await theirs.resetKey("127.0.0.1");
    await mine.resetKey("127.0.0.1");
    expect(await observe(b)).toEqual(await observe(a));
  });

  it("Redis unreachable: express-rate-limit answers 500 (passOnStoreError false); ratekeeper's RedisStore answers by its own failure policy", async () => {
    const down = await startRedis();
    const dead = new Redis(down.port, down.host, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    await down.stop();
    const theirs = erl({
      limit: 2,
      logger: { warn: () => undefined, error: () => undefined },
      store: new ErlRedisStore({ sendCommand: (command: string, ...args: string[]) => dead.call(command, ...args) as Promise<RedisReply> }),
    }) as unknown as Limiter;
    const a = await start(theirs);
    expect((await observe(a)).status).toBe(500);
    // Default failure "degraded": this process limits at limit / (processes seen), so it serves.
    const degraded = await start(ours({ limit: 2, store: new RedisStore({ client: dead, timeoutMs: 50 }) }));
    expect((await observe(degraded)).status).toBe(200);
    // failure "throw": the store's error meets passOnStoreError (false: 503, true: served).
    const closed = await start(
      ours({
        limit: 2,
        store: new RedisStore({ client: dead, failure: "throw", timeoutMs: 50 }),
        onError: () => undefined,
      }),
    );
    expect((await observe(closed)).status).toBe(503);
    const open = await start(
      ours({
        limit: 2,
        store: new RedisStore({ client: dead, failure: "throw", timeoutMs: 50 }),
        passOnStoreError: true,
        onError: () => undefined,
      }),
    );
    expect((await observe(open)).status).toBe(200);
    dead.disconnect();
  });

  it("rate-limit-redis's store given to ratekeeper is refused, naming ratekeeper's RedisStore", () => {
    const store = new ErlRedisStore({
      sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<RedisReply>,
    });
    expect(() => ours({ limit: 3, store } as never)).toThrow(/store: an express-rate-limit store; give a ratekeeper store instead/);
  });
});
