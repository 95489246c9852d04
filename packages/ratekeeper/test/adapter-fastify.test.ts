import type { FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { createApp, start } from "../../../examples/fastify/app.js";
import { realDriver, type Driver, type Reply } from "./http-support.js";
import { behaviourTable, redisBehaviourTable } from "./http-table.js";

const pathOf = (req: unknown) => (req as FastifyRequest).url.split("?")[0] as string;

/** fastify.inject: in-process, no socket (light-my-request's default peer is 127.0.0.1). */
const inject: Driver = {
  name: "fastify (inject)",
  real: false,
  pathOf,
  async start(options) {
    const app = await createApp(options);
    await app.ready();
    return {
      async request(r = {}): Promise<Reply> {
        const res = await app.inject({
          method: (r.method ?? "GET") as "GET",
          url: r.path ?? "/",
          headers: r.headers,
          remoteAddress: "127.0.0.1",
        });
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
        return { status: res.statusCode, headers, body: res.body };
      },
      close: () => app.close(),
    };
  },
};

describe("Fastify adapter (examples/fastify)", () => {
  const real = realDriver("fastify", start, pathOf);
  behaviourTable(real);
  behaviourTable(inject);
  redisBehaviourTable([real, inject]);
});

describe("Fastify specifics", () => {
  it("the plugin is not encapsulated (skip-override): registered at the root it limits routes of every context", async () => {
    const Fastify = (await import("fastify")).default;
    const { rateLimitPlugin } = await import("ratekeeper/fastify");
    const app = Fastify();
    await app.register(rateLimitPlugin, {
      limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
      clock: () => 1_700_000_040_000,
    });
    await app.register(async (child) => {
      child.get("/child", async () => "child");
    });
    app.get("/", async () => "root");
    expect((await app.inject({ url: "/" })).statusCode).toBe(200);
    expect((await app.inject({ url: "/child" })).statusCode).toBe(429);
    await app.close();
  });

  it("registered inside a child context, it limits only that context; the hook form limits one route; custom handler", async () => {
    const Fastify = (await import("fastify")).default;
    const { rateLimitPlugin, rateLimitHook } = await import("ratekeeper/fastify");
    const app = Fastify();
    await app.register(async (child) => {
      await child.register(rateLimitPlugin, {
        limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
        clock: () => 1_700_000_040_000,
      });
      child.get("/limited", async () => "limited");
    });
    app.get("/free", async () => "free");
    app.get(
      "/hooked/:id",
      {
        onRequest: rateLimitHook({
          limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
          clock: () => 1_700_000_040_000,
          key: "route",
          handler: async (_req, reply, result) => {
            await reply.code(result.status).send({ custom: true });
          },
        }),
      },
      async () => "hooked",
    );
    for (let i = 0; i < 3; i++) expect((await app.inject({ url: "/free" })).statusCode).toBe(200);
    expect((await app.inject({ url: "/limited" })).statusCode).toBe(200);
    expect((await app.inject({ url: "/limited" })).statusCode).toBe(429);
    expect((await app.inject({ url: "/hooked/1" })).statusCode).toBe(200);
    const r = await app.inject({ url: "/hooked/2" });
    expect([r.statusCode, r.json(), r.headers["retry-after"]]).toEqual([429, { custom: true }, "60"]);
    await app.close();
  });

  it("as a preHandler hook the parsed body is there: a cost priced by the body (a batch's size)", async () => {
    const Fastify = (await import("fastify")).default;
    const { rateLimitHook } = await import("ratekeeper/fastify");
    const app = Fastify();
    const costs: number[] = [];
    app.post(
      "/batch",
      {
        preHandler: rateLimitHook({
          limits: [{ algorithm: "fixed-window", limit: 10, window: "1h" }],
          clock: () => 1_700_000_040_000,
          cost: (req) => (req.body as { items?: unknown[] } | undefined)?.items?.length ?? 1,
          onDecision: (e) => costs.push(e.cost),
        }),
      },
      async () => "ok",
    );
    const send = async (n: number) =>
      (await app.inject({ method: "POST", url: "/batch", payload: { items: Array<number>(n).fill(0) } })).statusCode;
    expect([await send(3), await send(5), await send(4), await send(2)]).toEqual([200, 200, 429, 200]);
    expect(costs).toEqual([3, 5, 4, 2]);
    // More than the policy ever admits: refused, and never charged.
    expect(await send(50)).toBe(429);
    expect(costs).toEqual([3, 5, 4, 2]);
    await app.close();
  });
});
