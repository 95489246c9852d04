/**
 * The Hono example (examples/hono/app.js) where Hono users deploy it: Cloudflare Workers (workerd,
 * through miniflare, with and without the nodejs_compat flag), Deno and Bun, all from npm. The app
 * file is the same on each; only the few lines that serve it differ (examples/hono/{worker,deno,
 * bun}.js). Each runtime must load `ratekeeper/hono` (no node:* import, no timer or random value
 * in a module's global scope, which workerd refuses), find the client's address where the runtime
 * puts it, and admit exactly the limit.
 *
 * The exactness runs use the fixtures in fixtures/hono-edge/ (the example app with a 5-per-hour
 * sliding log, exact whatever the pace, so no timing is involved); the example's own entry files
 * are started too and must answer with the example's policy.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterEach, describe, expect, it } from "vitest";
import { captureLines, freePort, portOpen, stopProcess, track, until } from "../../../test-support/process.js";
import { startRedisRest } from "../../../test-support/redis-rest.js";
import { redisTestMode, startRedis } from "../../../test-support/redis.js";
import { loadMiniflare, runtimeBinary } from "../../../test-support/runtimes.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const FIXTURES = path.join(ROOT, "packages/ratekeeper/test/fixtures/hono-edge");
const EXAMPLE = path.join(ROOT, "examples/hono");

/** Requests sent at once to a fresh app: more than the limit (5). */
const BURST = 12;

/** A request's answer, its body read at once. */
interface Answer {
  status: number;
  headers: Headers;
  body: string;
}
type Fetcher = (path: string) => Promise<Answer>;

/** Wraps a fetch-like function so every answer's body is read before the next step. */
const reading =
  (f: (path: string) => Promise<{ status: number; headers: Headers; text(): Promise<string> }>): Fetcher =>
  async (p) => {
    const r = await f(p);
    return { status: r.status, headers: r.headers, body: await r.text() };
  };

/** Sends BURST requests at once and one more after them: exactly 5 pass, the rest get 429 with the limit's headers. */
async function expectExactlyTheLimit(fetcher: Fetcher): Promise<void> {
  const replies = await Promise.all(Array.from({ length: BURST }, () => fetcher("/")));
  const statuses = replies.map((r) => r.status);
  expect(
    statuses.filter((s) => s === 200),
    JSON.stringify(replies.filter((r) => r.status !== 200 && r.status !== 429)),
  ).toHaveLength(5);
  expect(statuses.filter((s) => s === 429)).toHaveLength(BURST - 5);
  const after = await fetcher("/user");
  expect(after.status).toBe(429);
  expect(Number(after.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(after.headers.get("ratelimit")).toMatch(/^"5-per-1h";r=0;t=\d+$/);
}

/** The example's own entry point answers with the example's policy. */
async function expectExamplePolicy(fetcher: Fetcher): Promise<void> {
  const r = await fetcher("/");
  expect([r.status, r.body]).toEqual([200, "hello"]);
  expect(r.headers.get("ratelimit-policy")).toBe('"100-per-1m";q=100;w=60, "burst";q=2;w=1');
}

/** Bundles a Worker entry as wrangler does (esbuild, the workerd/worker/browser export conditions). */
async function bundleWorker(entry: string): Promise<string> {
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    write: false,
    logLevel: "silent",
  });
  return (out.outputFiles[0] as { text: string }).text;
}

const miniflare = await loadMiniflare();

describe.skipIf(miniflare === undefined)("Cloudflare Workers (workerd via miniflare)", () => {
  for (const flags of [[], ["nodejs_compat"]]) {
    const label = flags.length === 0 ? "without nodejs_compat" : "with nodejs_compat";

    it(`loads ratekeeper/hono ${label}: no node:* import in the bundle, starts, admits exactly the limit`, async () => {
      const script = await bundleWorker(path.join(FIXTURES, "worker.js"));
      expect(script).not.toMatch(/from\s*["']node:/);
      const mf = new miniflare!.Miniflare({ modules: true, script, compatibilityDate: "2025-09-01", compatibilityFlags: flags });
      try {
        await expectExactlyTheLimit(reading((p) => mf.dispatchFetch(`http://localhost${p}`)));
      } finally {
        await mf.dispose();
      }
    });

    it(`runs examples/hono/worker.js as it is ${label}`, async () => {
      const script = await bundleWorker(path.join(EXAMPLE, "worker.js"));
      const mf = new miniflare!.Miniflare({ modules: true, script, compatibilityDate: "2025-09-01", compatibilityFlags: flags });
      try {
        await expectExamplePolicy(reading((p) => mf.dispatchFetch(`http://localhost${p}`)));
      } finally {
        await mf.dispose();
      }
    });
  }
});

describe.skipIf(miniflare === undefined || redisTestMode() === "skip")(
  "Cloudflare Workers sharing one Redis (HttpRedisStore over @upstash/redis)",
  () => {
    it("two workerd instances, one with nodejs_compat and one without, admit exactly the limit between them", async () => {
      const redis = await startRedis();
      const rest = await startRedisRest(redis.port);
      const script = await bundleWorker(path.join(FIXTURES, "worker-redis.js"));
      const bindings = { REDIS_REST_URL: rest.url, REDIS_REST_TOKEN: rest.token, TIMEOUT_MS: "60000" };
      const opts = { modules: true, script, compatibilityDate: "2025-09-01", bindings };
      const a = new miniflare!.Miniflare({ ...opts, compatibilityFlags: [] });
      const b = new miniflare!.Miniflare({ ...opts, compatibilityFlags: ["nodejs_compat"] });
      try {
        let i = 0;
        await expectExactlyTheLimit(reading((p) => (i++ % 2 === 0 ? a : b).dispatchFetch(`http://localhost${p}`)));
        expect(rest.commands.filter((c) => c === "evalsha" || c === "eval").length).toBeGreaterThanOrEqual(BURST + 1);
      } finally {
        await Promise.all([a.dispose(), b.dispose()]);
        await rest.close();
        await redis.stop();
      }
    });
  },
);

/** A server process of another runtime, serving one entry file on a free port. */
async function serve(bin: string, args: string[], entry: string): Promise<{ fetcher: Fetcher; child: ChildProcess }> {
  const port = await freePort();
  const child = track(
    spawn(bin, [...args, entry], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const lines = captureLines(child);
  try {
    await until(
      async () => {
        if (child.exitCode !== null) throw new Error(`${path.basename(bin)} exited: ${lines.join("\n")}`);
        return portOpen(port);
      },
      `${path.basename(bin)} ${path.relative(ROOT, entry)} to listen on ${port}`,
      600,
      50,
    );
  } catch (e) {
    await stopProcess(child, "SIGKILL");
    throw e;
  }
  return { fetcher: reading((p) => fetch(`http://127.0.0.1:${port}${p}`)), child };
}

const running: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => stopProcess(c, "SIGTERM", 5000)));
});

const RUNTIMES = [
  { name: "Deno", bin: runtimeBinary("deno"), args: ["run", "--allow-net", "--allow-env", "--allow-read"], file: "deno.js" },
  { name: "Bun", bin: runtimeBinary("bun"), args: [], file: "bun.js" },
];

for (const rt of RUNTIMES) {
  describe.skipIf(rt.bin === undefined)(`${rt.name} (from npm)`, () => {
    it("admits exactly the limit, keyed by the address the runtime reports", async () => {
      const s = await serve(rt.bin!, rt.args, path.join(FIXTURES, rt.file));
      running.push(s.child);
      await expectExactlyTheLimit(s.fetcher);
    });

    it(`runs examples/hono/${rt.file} as it is`, async () => {
      const s = await serve(rt.bin!, rt.args, path.join(EXAMPLE, rt.file));
      running.push(s.child);
      await expectExamplePolicy(s.fetcher);
    });
  });
}
