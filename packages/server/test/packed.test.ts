/**
 * The packages as a user installs them: both packed (`npm pack`, prepack builds), installed into
 * an empty project, every subpath imported from ESM and from CommonJS, a TypeScript consumer
 * typechecked under `module: nodenext` and `moduleResolution: bundler`, and the installed
 * `ratekeeper serve` started with no config file. Then every code sample of README.md, the
 * packages' READMEs and docs/ checked against the same installed packages (doc-samples.ts).
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureLines, stopProcess, track, until } from "../../../test-support/process.js";
import { PACKAGES, TSC, exportedSpecifiers, installPackedProject, type PackedProject } from "./packed-support.js";
import { brokenLinks, checkSamples } from "./doc-samples.js";

let project: PackedProject | undefined;
const specifiers = PACKAGES.flatMap((p) => exportedSpecifiers(p));

beforeAll(() => {
  project = installPackedProject("packed");
}, 900_000);
afterAll(() => project?.remove());

/** The project, or skip the test (the install was skipped loudly). */
function need(ctx: { skip(): void }): PackedProject {
  if (!project) ctx.skip();
  return project!;
}

describe("the packed tarballs", () => {
  it("carry dist with types, the package's own README, LICENSE and CHANGELOG; the server is public and ships its default rules", (ctx) => {
    const p = need(ctx);
    for (const name of PACKAGES) {
      const files = spawnSync("tar", ["-tzf", p.tarballs[name]!], { encoding: "utf8" }).stdout.split("\n");
      for (const f of ["dist/index.js", "dist/index.d.ts", "README.md", "LICENSE", "CHANGELOG.md", "package.json"])
        expect(files, `${name}: ${f}`).toContain(`package/${f}`);
      expect(
        files.some((f) => f.endsWith(".tsbuildinfo")),
        `${name}: no build info`,
      ).toBe(false);
      const readme = readFileSync(path.join(p.dir, "node_modules", name, "README.md"), "utf8");
      expect(readme.split("\n")[0]).toBe(`# ${name}`);
      const pkg = JSON.parse(readFileSync(path.join(p.dir, "node_modules", name, "package.json"), "utf8")) as Record<string, unknown>;
      expect(pkg.private).toBeUndefined();
    }
    const server = spawnSync("tar", ["-tzf", p.tarballs["@ratekeeper/server"]!], { encoding: "utf8" }).stdout;
    expect(server).toContain("package/rules/default.yaml");
    expect(server).toContain("package/bin/ratekeeper.js");
  });

  it("every subpath loads with import, from the project's own node_modules", (ctx) => {
    const p = need(ctx);
    writeFileSync(
      path.join(p.dir, "esm.mjs"),
      `for (const s of ${JSON.stringify(specifiers)}) { const m = await import(s); console.log(s, Object.keys(m).length, import.meta.resolve(s)); }\n`,
    );
    const lines = p.run(process.execPath, ["esm.mjs"]).trim().split("\n");
    expect(lines).toHaveLength(specifiers.length);
    const own = pathToFileURL(path.join(p.dir, "node_modules")).href;
    for (const line of lines) {
      const [spec, count, url] = line.split(" ");
      expect(Number(count), `${spec} exports something`).toBeGreaterThan(0);
      expect(url!.startsWith(own), `${spec} resolved to ${url}`).toBe(true);
    }
  });

  it("every subpath loads with require() (Node.js >= 20.19 loads ES modules from require)", (ctx) => {
    const p = need(ctx);
    writeFileSync(
      path.join(p.dir, "cjs.cjs"),
      `for (const s of ${JSON.stringify(specifiers)}) { const m = require(s); console.log(s, Object.keys(m).length, require.resolve(s)); }\n`,
    );
    const lines = p.run(process.execPath, ["cjs.cjs"]).trim().split("\n");
    expect(lines).toHaveLength(specifiers.length);
    for (const line of lines) {
      const [spec, count, file] = line.split(" ");
      expect(Number(count), `${spec} exports something`).toBeGreaterThan(0);
      expect(file!.startsWith(path.join(p.dir, "node_modules")), `${spec} resolved to ${file}`).toBe(true);
    }
  });

  it("a TypeScript consumer typechecks under nodenext and under bundler resolution", (ctx) => {
    const p = need(ctx);
    writeFileSync(path.join(p.dir, "consumer.ts"), CONSUMER_TS);
    for (const [module, resolution] of [
      ["nodenext", "nodenext"],
      ["esnext", "bundler"],
    ] as const) {
      const config = {
        compilerOptions: {
          module,
          moduleResolution: resolution,
          target: "es2022",
          strict: true,
          noEmit: true,
          types: ["node"],
          skipLibCheck: true,
        },
        files: ["consumer.ts"],
      };
      writeFileSync(path.join(p.dir, `tsconfig.${resolution}.json`), JSON.stringify(config));
      const r = spawnSync(process.execPath, [TSC, "-p", `tsconfig.${resolution}.json`], { cwd: p.dir, encoding: "utf8" });
      expect(r.stdout + r.stderr, `tsc ${resolution}`).toBe("");
      expect(r.status).toBe(0);
    }
  }, 900_000);

  it("the installed `ratekeeper serve` starts with no config file, says it runs the built-in rules, and answers", async (ctx) => {
    const p = need(ctx);
    const bin = path.join(p.dir, "node_modules", ".bin", "ratekeeper");
    const child = track(
      spawn(bin, ["serve", "--port", "0", "--grpc-port", "0", "--host", "127.0.0.1", "--no-dashboard"], {
        cwd: p.dir,
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    const lines = captureLines(child);
    try {
      await until(() => lines.some((l) => l.includes('"msg":"listening"')), "the installed ratekeeper serve to listen", 1200, 50);
      expect(JSON.parse(lines[0]!).msg).toMatch(/^no --config: serving the built-in default rules/);
      const { httpPort } = JSON.parse(lines.find((l) => l.includes('"msg":"listening"'))!) as { httpPort: number };
      const r = await fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
        method: "POST",
        body: JSON.stringify({ domain: "web", descriptors: [{ remote_address: "1.2.3.4" }] }),
      });
      expect(await r.json()).toMatchObject({ allowed: true, statuses: [{ limit: 100, remaining: 99 }] });
    } finally {
      await stopProcess(child);
    }
  });
});

describe("every code sample in README.md, the packages' READMEs and docs/, against the installed packages", () => {
  it("typechecks (ts and js blocks), and the rules files validate", (ctx) => {
    checkSamples(need(ctx));
  }, 900_000);

  it("every relative link names a file of the repository", () => {
    expect(brokenLinks()).toEqual([]);
  });
});

/** Uses every entry point the way their READMEs do; typechecked, never run. */
const CONSUMER_TS = `
import { RateLimiter, MemoryStore, RateLimitConfigError, type Decision } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { HeaderWriter, type HeaderStyle } from "ratekeeper/http";
import { rateLimit as expressLimit } from "ratekeeper/express";
import { rateLimitPlugin, rateLimitHook } from "ratekeeper/fastify";
import { rateLimit as honoLimit } from "ratekeeper/hono";
import { rateLimit as nodeLimit, withRateLimit } from "ratekeeper/node";
import { simulate, scenario, formatTable } from "ratekeeper/simulate";
import { startService, loadRulesFile, DecisionService } from "@ratekeeper/server";

const limiter = new RateLimiter({ algorithm: "gcra", limit: 10, window: "1s", burst: 5, store: new MemoryStore() });
const d: Decision = await limiter.consume("user:42");
const retry: number = d.retryAfterMs;
const style: HeaderStyle = "ietf";
void [retry, style, HeaderWriter, RateLimitConfigError, RedisStore, rateLimitPlugin, rateLimitHook, withRateLimit];
void expressLimit({ limits: [{ algorithm: "fixed-window", limit: 100, window: "1m" }] });
void honoLimit({ limits: [{ algorithm: "fixed-window", limit: 100, window: "1m" }] });
void nodeLimit({ limits: [{ algorithm: "fixed-window", limit: 100, window: "1m" }] });
console.log(formatTable(simulate({ limit: 5, window: "10s", traffic: scenario("boundary", { limit: 5, windowMs: 10_000 }) })));
const svc = await startService({ configFile: "rules.yaml", port: 0, grpcPort: 0 });
await svc.close();
void new DecisionService({ store: new MemoryStore(), rules: loadRulesFile("rules.yaml") });
`;
