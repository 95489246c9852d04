/**
 * A small stand-in for Upstash's Redis REST API, in front of a real redis-server, so that
 * `@upstash/redis` (and HttpRedisStore through it) can be tested against real Redis on this
 * machine. It speaks what the client sends (@upstash/redis pkg/http.ts, pkg/pipeline.ts):
 * - `POST /` with a JSON array `["evalsha", sha, 2, "k1", "k2", "arg", ...]`: one command, answered
 *   `{"result": ...}`, or `{"error": "NOSCRIPT ..."}` with status 400;
 * - `POST /pipeline` with an array of such arrays: `[{"result": ...} | {"error": ...}, ...]`;
 * - `Authorization: Bearer <token>` required (401 otherwise);
 * - `Upstash-Encoding: base64`: string results base64-encoded ("OK" as is), as the client expects.
 * Each command goes to redis-server over one RESP connection, in order. `pause()` holds replies
 * (a Redis, or a network, that has gone silent) until `resume()`; `fail(true)` answers every
 * command with an error (status 500), as the real service does when its Redis is unreachable.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import net from "node:net";

export interface RedisRestHandle {
  /** `http://127.0.0.1:<port>` */
  url: string;
  token: string;
  /** Commands received, in order (their names, lower-cased), for tests that count round trips. */
  readonly commands: string[];
  /** Holds every reply from now on until resume(). */
  pause(): void;
  /** Sends the held replies and answers normally again. */
  resume(): void;
  /** While true, every command is answered with an error (HTTP 500). */
  fail(on: boolean): void;
  close(): Promise<void>;
}

type Reply = string | number | null | Reply[] | { error: string };

/** One RESP reply from `buf` at `at`: [value, next offset], or undefined when incomplete. */
function parse(buf: Buffer, at: number): [Reply, number] | undefined {
  const nl = buf.indexOf("\r\n", at);
  if (nl < 0) return undefined;
  const kind = String.fromCharCode(buf[at] as number);
  const line = buf.toString("utf8", at + 1, nl);
  const next = nl + 2;
  switch (kind) {
    case "+":
      return [line, next];
    case "-":
      return [{ error: line }, next];
    case ":":
      return [Number(line), next];
    case "$": {
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString("utf8", next, next + len), next + len + 2];
    }
    case "*": {
      const n = Number(line);
      if (n < 0) return [null, next];
      const out: Reply[] = [];
      let p = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, p);
        if (r === undefined) return undefined;
        out.push(r[0]);
        p = r[1];
      }
      return [out, p];
    }
    default:
      throw new Error(`unexpected RESP reply ${JSON.stringify(buf.toString("utf8", at, nl))}`);
  }
}

function encode(args: string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return out;
}

/** One RESP connection to redis-server; commands answered in order. */
function connect(port: number): { send(args: string[]): Promise<Reply>; close(): void } {
  const sock = net.createConnection({ host: "127.0.0.1", port });
  const waiting: ((r: Reply) => void)[] = [];
  let buf = Buffer.alloc(0);
  sock.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    let at = 0;
    for (;;) {
      const r = at < buf.length ? parse(buf, at) : undefined;
      if (r === undefined) break;
      at = r[1];
      waiting.shift()?.(r[0]);
    }
    buf = buf.subarray(at);
  });
  sock.on("error", () => {
    for (const w of waiting.splice(0)) w({ error: "ERR redis connection lost" });
  });
  return {
    send: (args) =>
      new Promise((resolve) => {
        waiting.push(resolve);
        sock.write(encode(args));
      }),
    close: () => sock.destroy(),
  };
}

/** The JSON form of a reply: strings base64-encoded when asked (except "OK"), errors kept apart. */
function toJson(r: Reply, base64: boolean): unknown {
  if (Array.isArray(r)) return r.map((x) => toJson(x, base64));
  if (typeof r === "string") return base64 && r !== "OK" ? Buffer.from(r, "utf8").toString("base64") : r;
  return r;
}

const isError = (r: Reply): r is { error: string } => typeof r === "object" && r !== null && !Array.isArray(r);

async function body(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * Starts the REST stand-in on a free loopback port, in front of the redis-server on `redisPort`.
 * @example
 * const redis = await startRedis();
 * const rest = await startRedisRest(redis.port);
 * const client = new Redis({ url: rest.url, token: rest.token });
 */
export async function startRedisRest(redisPort: number): Promise<RedisRestHandle> {
  const conn = connect(redisPort);
  const token = "test-token";
  const commands: string[] = [];
  let paused = false;
  let failing = false;
  const held: (() => void)[] = [];
  const later = (fn: () => void): void => {
    if (paused) held.push(fn);
    else fn();
  };
  const run = async (cmd: unknown): Promise<Reply> => {
    if (!Array.isArray(cmd) || cmd.length === 0) return { error: "ERR command must be a non-empty array" };
    const args = cmd.map((a) => (typeof a === "string" ? a : JSON.stringify(a)));
    commands.push((args[0] as string).toLowerCase());
    if (failing) return { error: "ERR the REST stand-in was told to fail" };
    return conn.send(args);
  };
  const answer = (res: ServerResponse, status: number, json: unknown): void =>
    later(() => {
      if (res.destroyed) return;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(json));
    });
  const server = createServer((req, res) => {
    void (async () => {
      if (req.headers.authorization !== `Bearer ${token}`) return answer(res, 401, { error: "Unauthorized" });
      const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
      const path = (req.url ?? "/").split("?")[0];
      const input = await body(req);
      if (path === "/pipeline") {
        if (!Array.isArray(input)) return answer(res, 400, { error: "ERR a pipeline is an array of commands" });
        const out: unknown[] = [];
        for (const cmd of input) {
          const r = await run(cmd);
          out.push(isError(r) ? { error: r.error } : { result: toJson(r, base64) });
        }
        return answer(res, failing ? 500 : 200, out);
      }
      if (path !== "/") return answer(res, 404, { error: `ERR no such endpoint ${path}` });
      const r = await run(input);
      if (isError(r)) return answer(res, failing ? 500 : 400, { error: r.error });
      return answer(res, 200, { result: toJson(r, base64) });
    })().catch((e: unknown) => answer(res, 500, { error: `ERR ${(e as Error).message}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    token,
    commands,
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      for (const fn of held.splice(0)) fn();
    },
    fail: (on) => {
      failing = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        paused = false;
        for (const fn of held.splice(0)) fn();
        conn.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
