/**
 * Requests with no peer address. A node:http server listening on a unix socket (behind a local
 * proxy, a common deployment) sees no address for any client; if each such request were keyed
 * "unknown", every client would share one bucket, and one of them could spend everyone's
 * allowance. The middleware refuses them by default (403, reported through onError) when its key
 * needs the address; `noAddress: "allow"` lets them through unlimited; a key that does not use
 * the address is unaffected.
 */
import { createServer, request, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimit } from "../../src/adapters/node.js";
import type { NodeRateLimitOptions } from "../../src/adapters/node.js";
import type { LimitSpec } from "../../src/index.js";

const servers: Server[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A server on a unix socket with the node adapter in front of a 200 handler. */
async function unixServer(options: NodeRateLimitOptions): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), "rk-unix-"));
  dirs.push(dir);
  const socketPath = path.join(dir, "app.sock");
  const limit = rateLimit(options);
  const server = createServer((req, res) => {
    void limit(req, res).then((go) => {
      if (go) res.end("ok");
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(socketPath, r));
  return socketPath;
}

function get(socketPath: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: "/", headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

const limits: LimitSpec[] = [{ algorithm: "fixed-window", limit: 2, window: "1h" }];

describe("requests with no peer address (a unix socket server)", () => {
  it("are refused with 403 by default when the key uses the address, and reported; never one shared bucket", async () => {
    const errors: unknown[] = [];
    const sock = await unixServer({ limits, onError: (e) => errors.push(e) });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await get(sock));
    expect(answers.map((a) => a.status)).toEqual([403, 403, 403]);
    expect(answers[0]!.body).toMatch(/address/);
    expect(errors).toHaveLength(3);
    expect(String(errors[0])).toMatch(/no client address.*noAddress/);
  });

  it('noAddress: "allow" lets them through unlimited (no shared bucket to exhaust)', async () => {
    const sock = await unixServer({ limits, noAddress: "allow" });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await get(sock)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });

  it("a key that does not use the address limits by that key as usual", async () => {
    const sock = await unixServer({ limits, key: (req) => String(req.headers["x-user"] ?? "") });
    const a = [];
    for (let i = 0; i < 3; i++) a.push((await get(sock, { "x-user": "alice" })).status);
    expect(a).toEqual([200, 200, 429]);
    expect((await get(sock, { "x-user": "bob" })).status).toBe(200);
  });

  it("refuses an unknown noAddress value, naming it", () => {
    expect(() => rateLimit({ limits, noAddress: "share" as never })).toThrow(/noAddress: must be "deny" or "allow"/);
  });
});
