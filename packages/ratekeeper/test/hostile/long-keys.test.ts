/**
 * The limiter takes keys of 1 to 1024 characters; a key part the client writes (a header's value,
 * the path) can be longer. Such a request must be limited like any other: before, the limiter's
 * RangeError was taken for a store failure and the request let through (`failure: "open"`),
 * unlimited and, without `onError`, silently: a client escaped every limit by sending a long API
 * key or a long path.
 */
import { createServer } from "node:http";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { rateLimit as honoLimit } from "../../src/adapters/hono.js";
import { rateLimit as nodeLimit } from "../../src/adapters/node.js";
import { fitKey } from "../../src/http/key-fit.js";
import { httpRequest, loopbackServers } from "../http-support.js";

const listen = loopbackServers();
const once = { limits: [{ algorithm: "fixed-window" as const, limit: 1, window: "1h" as const }], clock: () => 1_700_000_040_000 };

describe("keys longer than the limiter takes", () => {
  it("a long API key (key: { header }) is limited, and two that differ past the cut keep apart", async () => {
    const errors: unknown[] = [];
    const app = new Hono();
    app.use(honoLimit({ ...once, key: { header: "x-api-key" }, getRemoteAddress: () => "203.0.113.9", onError: (e) => errors.push(e) }));
    app.get("/", (c) => c.text("ok"));
    const long = "k".repeat(2000);
    const send = async (k: string) => (await app.request("/", { headers: { "x-api-key": k } })).status;
    expect(await send(long)).toBe(200);
    expect(await send(long)).toBe(429);
    expect(await send(`${long}x`)).toBe(200);
    expect(await send(`${long}x`)).toBe(429);
    expect(errors).toEqual([]);
  });

  it('a long path (key: ["ip", "path"]) is limited, node:http over real HTTP', async () => {
    const limit = nodeLimit({ ...once, key: ["ip", "path"] });
    const url = await listen(createServer((req, res) => void limit(req, res).then((ok) => ok && res.end("ok"))));
    const path = `/${"a".repeat(1500)}`;
    expect((await httpRequest(url, { path })).status).toBe(200);
    expect((await httpRequest(url, { path })).status).toBe(429);
  });

  it("fitKey: short keys unchanged; long ones at most 1024 characters, well formed, distinct", () => {
    expect(fitKey("203.0.113.9")).toBe("203.0.113.9");
    const k = "x".repeat(1024);
    expect(fitKey(k)).toBe(k);
    const a = fitKey(`${"x".repeat(959)}😀${"y".repeat(100)}`);
    expect(a.length).toBeLessThanOrEqual(1024);
    expect((a as unknown as { isWellFormed(): boolean }).isWellFormed()).toBe(true);
    expect(fitKey(`${"z".repeat(1100)}1`)).not.toBe(fitKey(`${"z".repeat(1100)}2`));
  });
});
