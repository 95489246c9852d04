/**
 * The `concurrency` option on Hono where there is no Node response to watch (Bun, Deno, Cloudflare
 * Workers, `app.request()`): the lease goes back when the wrapped body is read to its end or
 * cancelled (hono-stream-lease.test.ts). A body that is dropped unread and never cancelled (a
 * middleware registered before ours replaces `c.res` with a Response of its own; Hono's `c.res`
 * setter does not cancel the old body) would otherwise hold its slot, renewed every third of
 * `leaseMs`, for as long as the process runs. A body nobody has started reading `leaseMs` after
 * the handler returned gives its slot back then; a body being read keeps it.
 * The pool's clock is injected and the timers faked, so no time passes.
 */
import { Hono } from "hono";
import { streamText } from "hono/streaming";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConcurrencyLimiter, MemoryStore } from "ratekeeper";
import { rateLimit } from "ratekeeper/hono";

const LEASE_MS = 30_000;

function setup(replace: boolean) {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout"] });
  const clock = { now: 1_763_740_800_000 };
  const pool = new ConcurrencyLimiter({
    limit: 1,
    leaseMs: LEASE_MS,
    store: new MemoryStore({ sweepIntervalMs: 0 }),
    clock: () => clock.now,
  });
  const app = new Hono();
  // An outer middleware that answers with a Response of its own: ours is dropped, never read nor cancelled.
  if (replace) {
    app.use(async (c, next) => {
      await next();
      c.res = new Response("replaced", { status: c.res.status });
    });
  }
  app.use(rateLimit({ concurrency: pool, getRemoteAddress: () => "203.0.113.9" }));
  app.get("/plain", (c) => c.text("plain"));
  app.get("/stream", (c) =>
    streamText(c, async (s) => {
      for (let i = 0; i < 100; i++) {
        await s.write("a");
        await new Promise<void>((r) => setImmediate(r));
      }
    }),
  );
  return { app, pool, clock };
}

/** `ms` of the injected clock and the faked timers, in steps of 5 s. */
async function pass(clock: { now: number }, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 5_000) {
    clock.now += 5_000;
    vi.advanceTimersByTime(5_000);
    await new Promise((r) => setImmediate(r));
  }
}

const remaining = async (pool: ConcurrencyLimiter): Promise<number> => (await pool.peek("203.0.113.9")).remaining;

afterEach(() => {
  vi.useRealTimers();
});

describe("Hono (fetch-style runtimes): a body dropped unread gives its lease back", () => {
  it("an outer middleware replaces the response: the slot comes back leaseMs after the handler returned, no timer left", async () => {
    const { app, pool, clock } = setup(true);
    const res = await app.request("/plain");
    expect(await res.text()).toBe("replaced");
    expect(await remaining(pool)).toBe(0);
    await pass(clock, LEASE_MS - 5_000);
    expect(await remaining(pool)).toBe(0); // not before leaseMs
    await pass(clock, 5_000);
    expect(await remaining(pool)).toBe(1);
    await pass(clock, 4 * LEASE_MS);
    expect(await remaining(pool)).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
    expect((await app.request("/plain")).status).toBe(200);
  });

  it("a body whose reading has begun keeps its slot, renewed, however long it takes", async () => {
    const { app, pool, clock } = setup(false);
    const res = await app.request("/stream");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    expect((await reader.read()).done).toBe(false);
    await pass(clock, 4 * LEASE_MS);
    expect(await remaining(pool)).toBe(0);
    while (!(await reader.read()).done);
    await new Promise((r) => setImmediate(r));
    expect(await remaining(pool)).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
