import type { Context, Hono } from "hono";
import { describe } from "vitest";
import { createApp, start } from "../../../examples/hono/app.js";
import { behaviourTable, realDriver, type Driver, type Reply } from "./http-table.js";

const pathOf = (c: unknown) => (c as Context).req.path;

/**
 * app.request(): in-process, no socket. The peer address goes in through the same bindings
 * @hono/node-server provides (`env.incoming.socket.remoteAddress`), which the adapter reads.
 */
const inProcess: Driver = {
  name: "hono (app.request)",
  real: false,
  pathOf,
  start(options) {
    const app = createApp(options) as Hono;
    const env = { incoming: { socket: { remoteAddress: "127.0.0.1" } } };
    return Promise.resolve({
      async request(r = {}): Promise<Reply> {
        const res = await app.request(r.path ?? "/", { method: r.method ?? "GET", headers: r.headers }, env);
        const headers: Record<string, string> = {};
        res.headers.forEach((v, k) => (headers[k] = v));
        return { status: res.status, headers, body: await res.text() };
      },
      close: () => Promise.resolve(),
    });
  },
};

describe("Hono adapter (examples/hono)", () => {
  behaviourTable(realDriver("hono", start, pathOf));
  behaviourTable(inProcess);
});
