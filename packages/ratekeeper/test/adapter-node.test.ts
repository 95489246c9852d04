import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { start } from "../../../examples/node/app.js";
import { httpRequest, realDriver } from "./http-support.js";
import { behaviourTable, redisBehaviourTable } from "./http-table.js";

const driver = realDriver("node:http", start, (req) => ((req as IncomingMessage).url ?? "/").split("?")[0] as string);

describe("node:http adapter (examples/node over real HTTP)", () => {
  behaviourTable(driver);
  redisBehaviourTable([driver]);
});

describe("node:http specifics", () => {
  it("writes the limit headers with lower-case names (node would copy mixed-case names into lower case per request)", async () => {
    const http = await import("node:http");
    const { withRateLimit } = await import("ratekeeper/node");
    const server = http.createServer(
      withRateLimit({ limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }], clock: () => 1_700_000_040_000 }, (_q, res) => {
        res.end("ok");
      }),
    );
    server.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const port = (server.address() as { port: number }).port;
    const raw = (): Promise<string[]> =>
      new Promise((resolve, reject) => {
        http
          .get({ port, host: "127.0.0.1" }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.rawHeaders.filter((_, i) => i % 2 === 0)));
          })
          .on("error", reject);
      });
    try {
      expect(await raw()).toEqual(expect.arrayContaining(["ratelimit-policy", "ratelimit"]));
      expect(await raw()).toEqual(expect.arrayContaining(["ratelimit-policy", "ratelimit", "retry-after", "content-type"]));
    } finally {
      server.close();
    }
  });

  it("the function form resolves false after answering, and a custom handler can answer instead", async () => {
    const http = await import("node:http");
    const { rateLimit } = await import("ratekeeper/node");
    const limit = rateLimit({
      limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }],
      clock: () => 1_700_000_040_000,
      handler: (_req, res, result) => {
        res.statusCode = result.status;
        res.end(`custom ${result.status}`);
      },
    });
    const answered: boolean[] = [];
    const server = http.createServer((req, res) => {
      void limit(req, res).then((go) => {
        answered.push(go);
        if (go) res.end("ok");
      });
    });
    server.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      expect((await httpRequest(url)).body).toBe("ok");
      const r = await httpRequest(url);
      expect([r.status, r.body, r.headers["retry-after"]]).toEqual([429, "custom 429", "60"]);
      expect(answered).toEqual([true, false]);
      expect(limit.core.limiter?.limits[0]?.limit).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
