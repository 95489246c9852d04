/**
 * Test helpers for the decision service: start it as a PROCESS (the built CLI) on free ports,
 * an Envoy RLS gRPC client built from the same protos, and a real nginx in a temp prefix.
 * Every process started here is killed by `stopAll()` (call it in afterAll) and, as a safety
 * net, when the test process exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { captureLines, hasExited, portOpen, stopProcess, track, until } from "../../../test-support/process.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const CLI = path.join(ROOT, "packages/server/dist/cli.js");
export const PROTO_DIR = path.join(ROOT, "packages/server/proto");

/** A running service process. */
export interface ServiceProc {
  proc: ChildProcess;
  httpPort: number;
  grpcPort: number;
  base: string;
  /** Every stdout/stderr line so far (pino JSON lines). */
  lines: string[];
  /** SIGTERM, then wait for exit; resolves the exit code. */
  stop(): Promise<number | null>;
}

/** The environment without the RATEKEEPER_* variables of the shell that runs the tests. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RATEKEEPER_")));
}

/**
 * Starts `ratekeeper serve` on free ports (`--port 0 --grpc-port 0`) and waits for its
 * "listening" log line, which carries the bound ports. `env` is added to an environment without
 * RATEKEEPER_* variables. `stop()` sends SIGTERM and SIGKILLs after 10 s.
 */
export function startServiceProcess(args: string[], env: Record<string, string> = {}): Promise<ServiceProc> {
  const proc = track(
    spawn(process.execPath, [CLI, "serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1", ...args], {
      env: { ...cleanEnv(), LOG_LEVEL: "info", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  return new Promise((resolve, reject) => {
    const lines = captureLines(proc, (line) => {
      if (!line.includes('"msg":"listening"')) return;
      const j = JSON.parse(line) as { httpPort: number; grpcPort: number };
      resolve({
        proc,
        httpPort: j.httpPort,
        grpcPort: j.grpcPort,
        base: `http://127.0.0.1:${j.httpPort}`,
        lines,
        stop: () => stopProcess(proc),
      });
    });
    proc.once("exit", (code) => reject(new Error(`service exited (${String(code)}) before listening:\n${lines.join("\n")}`)));
  });
}

/** POSTs JSON; returns status, headers and the parsed body. */
export async function postJson(url: string, body: unknown): Promise<{ status: number; headers: Headers; json: any }> {
  const r = await fetch(url, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  const text = await r.text();
  // A body that is not JSON (a proxy's own error page) fails with what was answered, not only a SyntaxError.
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    throw new Error(`POST ${url}: ${r.status}, not JSON: ${text.slice(0, 500)}`);
  }
  return { status: r.status, headers: r.headers, json };
}

/** GETs a URL and parses its JSON body. */
export async function getJson(url: string): Promise<any> {
  return (await fetch(url)).json();
}

/**
 * A client of `envoy.service.ratelimit.v3.RateLimitService`, built from the official Envoy protos
 * (packages/server/proto: unmodified copies of envoyproxy/data-plane-api and its imports, see
 * SOURCES.md there), never from protos of our own.
 */
export interface RlsClient {
  shouldRateLimit(req: unknown): Promise<any>;
  close(): void;
}

export function rlsClient(port: number): RlsClient {
  const def = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const Client = pkg.envoy.service.ratelimit.v3.RateLimitService as grpc.ServiceClientConstructor;
  const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as any;
  return {
    shouldRateLimit: (req) =>
      new Promise((resolve, reject) => c.ShouldRateLimit(req, (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res)))),
    close: () => c.close(),
  };
}

/** A client of `grpc.health.v1.Health`, from the official grpc/grpc-proto copy. */
export interface HealthClient {
  check(service: string): Promise<{ status: string }>;
  /** The first status a Watch stream sends. */
  watchFirst(service: string): Promise<{ status: string }>;
  close(): void;
}

export function healthClient(port: number): HealthClient {
  const def = protoLoader.loadSync("grpc/health/v1/health.proto", { includeDirs: [PROTO_DIR], keepCase: true, enums: String });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const c = new pkg.grpc.health.v1.Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return {
    check: (service) =>
      new Promise((resolve, reject) => c.Check({ service }, (err: Error | null, res: any) => (err ? reject(err) : resolve(res)))),
    watchFirst: (service) =>
      new Promise((resolve, reject) => {
        const stream = c.Watch({ service });
        stream.once("data", (m: { status: string }) => {
          stream.cancel();
          resolve(m);
        });
        stream.once("error", (e: Error & { code?: number }) => {
          // Cancelling the stream after its first message ends it with CANCELLED (1).
          if (e.code !== 1) reject(e);
        });
      }),
    close: () => c.close(),
  };
}

/** A running nginx. */
export interface NginxProc {
  port: number;
  dir: string;
  errorLog(): string;
  stop(): Promise<void>;
}

/**
 * Starts a real nginx (`<binary> -p DIR -c FILE -g 'daemon off;'`) with `conf`, whose
 * pid file, error log and temp paths are put in a fresh temp prefix dir. `conf` must listen on `port`.
 * `binary` comes from findBinary (test-support/outside.ts), which skips or fails without nginx.
 */
export async function startNginx(conf: string, port: number, binary: string): Promise<NginxProc> {
  const dir = mkdtempSync(path.join(tmpdir(), "rk-nginx-"));
  const file = path.join(dir, "nginx.conf");
  writeFileSync(file, conf);
  const proc = track(
    spawn(binary, ["-p", dir, "-c", file, "-e", path.join(dir, "error.log"), "-g", `daemon off; pid ${path.join(dir, "nginx.pid")};`], {
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const out = captureLines(proc);
  const errorLog = () => {
    try {
      return readFileSync(path.join(dir, "error.log"), "utf8");
    } catch {
      return "";
    }
  };
  await until(async () => {
    if (hasExited(proc)) throw new Error(`nginx exited: ${out.join("\n")}\n${errorLog()}`);
    return portOpen(port);
  }, "nginx to listen");
  return {
    port,
    dir,
    errorLog,
    stop: async () => {
      // SIGQUIT: nginx's graceful shutdown.
      await stopProcess(proc, "SIGQUIT");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads an example file from the repository. */
export function example(rel: string): string {
  return readFileSync(path.join(ROOT, rel), "utf8");
}

/**
 * Adapts an example nginx config to the test: rewrites `127.0.0.1:<port>` addresses through
 * `ports`, and puts logs and temp files inside the prefix dir (the distribution's compiled-in
 * /var/lib/nginx paths may not be writable).
 */
export function adaptNginxConf(conf: string, ports: Record<number, number>): string {
  let out = conf.replace(/127\.0\.0\.1:(\d+)/g, (m, p: string) => (ports[Number(p)] !== undefined ? `127.0.0.1:${ports[Number(p)]}` : m));
  const paths = ["client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path", "scgi_temp_path"]
    .map((d) => `  ${d} ${d.replace("_path", "")};`)
    .join("\n");
  out = out.replace(/^http \{$/m, `http {\n  access_log access.log;\n${paths}`);
  return out;
}
