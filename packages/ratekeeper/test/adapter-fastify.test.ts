import type { FastifyInstance, FastifyRequest } from "fastify";
import { describe } from "vitest";
import { createApp, start } from "../../../examples/fastify/app.js";
import { behaviourTable, realDriver, type Driver, type Reply } from "./http-table.js";

const pathOf = (req: unknown) => (req as FastifyRequest).url.split("?")[0] as string;

/** fastify.inject: in-process, no socket (light-my-request's default peer is 127.0.0.1). */
const inject: Driver = {
  name: "fastify (inject)",
  real: false,
  pathOf,
  async start(options) {
    const app = (await createApp(options)) as FastifyInstance;
    await app.ready();
    return {
      async request(r = {}): Promise<Reply> {
        const res = await app.inject({ method: (r.method ?? "GET") as "GET", url: r.path ?? "/", headers: r.headers, remoteAddress: "127.0.0.1" });
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
        return { status: res.statusCode, headers, body: res.body };
      },
      close: () => app.close(),
    };
  },
};

describe("Fastify adapter (examples/fastify)", () => {
  behaviourTable(realDriver("fastify", start, pathOf));
  behaviourTable(inject);
});
