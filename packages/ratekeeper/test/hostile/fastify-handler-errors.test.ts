/**
 * A custom refusal (`handler`) that throws must reach Fastify's error handling (a 500), whether
 * the verdict came at once (memory store, plain key) or later (an async key, a Redis store):
 * never an unhandled rejection, which node turns into a crash, with the request left hanging.
 */
import Fastify, { type FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { rateLimitHook } from "../../src/adapters/fastify.js";

async function appWith(key: ((req: FastifyRequest) => string | Promise<string>) | undefined) {
  const app = Fastify();
  app.addHook(
    "onRequest",
    rateLimitHook({
      limits: [{ algorithm: "fixed-window", limit: 1, window: "1h" }],
      clock: () => 1_700_000_040_000,
      ...(key === undefined ? {} : { key }),
      handler: () => {
        throw new Error("handler boom");
      },
    }),
  );
  app.get("/", async () => "ok");
  await app.ready();
  return app;
}

/** The status of a request, or "hung" when none came within a second. */
async function statusOf(app: Awaited<ReturnType<typeof appWith>>): Promise<number | "hung"> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((r) => (timer = setTimeout(() => r("hung"), 1000)));
  const r = await Promise.race([app.inject({ url: "/" }).then((x) => x.statusCode), hung]);
  clearTimeout(timer);
  return r;
}

describe("Fastify: a custom refusal that throws", () => {
  it.each([
    ["a verdict given at once", undefined],
    ["a verdict that came later (async key)", async () => "k"],
  ])("%s: Fastify answers 500, nothing left unhandled", async (_name, key) => {
    const rejections: unknown[] = [];
    const onRejection = (e: unknown): void => void rejections.push(e);
    process.on("unhandledRejection", onRejection);
    try {
      const app = await appWith(key);
      expect(await statusOf(app)).toBe(200);
      expect(await statusOf(app)).toBe(500);
      await new Promise((r) => setImmediate(r));
      expect(rejections).toEqual([]);
      await app.close();
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });
});
