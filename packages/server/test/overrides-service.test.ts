/**
 * Overrides end to end, with the service as a process: they survive a restart (SQLite file and
 * PostgreSQL), `overrides import` from another process reaches a running service, export gives
 * back what was imported, import reports bad lines by number and writes nothing, and two
 * service instances sharing PostgreSQL see each other's changes within a second.
 */
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../../test-support/process.js";
import { call, checkUser, createTestDatabase, postgresTestMode, tempDir, writeRules, type TestDatabase } from "./overrides-support.js";
import { CLI, startServiceProcess, type ServiceProc } from "./support.js";

const run = promisify(execFile);
const pgMode = await postgresTestMode();
const TOKEN = "svc-token-0123456789";
const tight = [{ algorithm: "fixed-window", limit: 3, window: "1h" }];

async function cli(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  if (input !== undefined) {
    return new Promise((resolve) => {
      const child = execFile(
        process.execPath,
        [CLI, ...args],
        { env: { ...process.env, RATEKEEPER_OVERRIDES: "" } },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(input);
    });
  }
  try {
    const r = await run(process.execPath, [CLI, ...args], { env: { ...process.env, RATEKEEPER_OVERRIDES: "" } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe("overrides with the service process and a SQLite file", () => {
  const tmp = tempDir("svc");
  let rules: string;
  let url: string;
  const procs: ServiceProc[] = [];

  beforeAll(() => {
    rules = writeRules(tmp.dir);
    url = `sqlite:${tmp.file("data/overrides.db")}`;
  });
  afterAll(async () => {
    for (const p of procs) await p.stop();
    tmp.remove();
  });

  async function serve(): Promise<ServiceProc> {
    const p = await startServiceProcess(["--no-watch", "--config", rules, "--overrides", url, "--admin-token", TOKEN]);
    procs.push(p);
    return p;
  }

  it("an override added through the admin API survives a restart", async () => {
    const first = await serve();
    const put = await call(first.base, "PUT", "/v1/admin/overrides/api/user_id=241531", {
      token: TOKEN,
      body: { limits: tight, note: "restart" },
    });
    expect(put.status).toBe(201);
    expect(await checkUser(first.base, "241531")).toMatchObject({ limit: 3, source: "override" });
    await first.stop();

    const second = await serve();
    expect(await checkUser(second.base, "241531")).toMatchObject({ limit: 3, source: "override" });
    expect(await checkUser(second.base, "1")).toMatchObject({ limit: 100, source: "rule" });
    await second.stop();
  });

  it("`overrides import` from another process reaches the running service; export gives it back", async () => {
    const svc = await serve();
    const lines = [
      JSON.stringify({ domain: "api", key: "user_id=10", policy: "blocked", note: "imported" }),
      "",
      JSON.stringify({ domain: "api", key: "user_id=11", limits: tight }),
      JSON.stringify({ domain: "api", key: "user_id=12", policy: "unlimited", expiresAtMs: Date.now() + 3_600_000 }),
    ];
    const file = tmp.file("in.jsonl");
    writeFileSync(file, `${lines.join("\n")}\n`);
    const imp = await cli(["overrides", "import", file, "--overrides", url]);
    expect(imp.code, imp.stderr).toBe(0);
    expect(imp.stdout).toMatch(/3 overrides written/);
    // The service was not told: its periodic version check (1 s) finds the import.
    await until(async () => (await checkUser(svc.base, "10")).policy === "blocked", "the service applies the imported block", 150, 100);
    expect(await checkUser(svc.base, "11")).toMatchObject({ limit: 3, source: "override" });

    const out = tmp.file("out.jsonl");
    const exp = await cli(["overrides", "export", out, "--overrides", url]);
    expect(exp.code).toBe(0);
    const exported = readFileSync(out, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { key: string });
    expect(exported.map((o) => o.key)).toEqual(["user_id=10", "user_id=11", "user_id=12", "user_id=241531"]);
    expect(exported[0]).toEqual({ domain: "api", key: "user_id=10", policy: "blocked", note: "imported" });

    // Round trip through stdin into a fresh file: the same export.
    const url2 = `sqlite:${tmp.file("copy.db")}`;
    const again = await cli(["overrides", "import", "-", "--overrides", url2], readFileSync(out, "utf8"));
    expect(again.code).toBe(0);
    const exp2 = await cli(["overrides", "export", "--overrides", url2]);
    expect(exp2.stdout).toBe(readFileSync(out, "utf8"));
    await svc.stop();
  });

  it("import validates every line first: reports each bad line by number and writes nothing", async () => {
    const file = tmp.file("bad.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ domain: "api", key: "user_id=20", policy: "blocked" }),
        JSON.stringify({ domain: "api", key: "user_id=21", limits: [{ algorithm: "fixed-window", limit: 5, window: "5 parsecs" }] }),
        "{oops",
        JSON.stringify({ domain: "api", key: "user_id=23", limits: [{ algorithm: "gcra", limit: -1, window: "1s" }] }),
      ].join("\n"),
    );
    const r = await cli(["overrides", "import", file, "--overrides", url]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}:2: limits[0].window: must be`);
    expect(r.stderr).toContain(`${file}:3: (line): not valid JSON`);
    expect(r.stderr).toContain(`${file}:4: limits[0].limit: must be a positive whole number`);
    expect(r.stderr).toMatch(/3 of 4 lines are bad; nothing was written/);
    const exp = await cli(["overrides", "export", "--overrides", url]);
    expect(exp.stdout).not.toContain("user_id=20");

    const noStore = await cli(["overrides", "export"]);
    expect(noStore.code).toBe(2);
    expect(noStore.stderr).toMatch(/--overrides: required/);
  });
});

describe.skipIf(pgMode === "skip")("overrides with service processes sharing PostgreSQL", () => {
  const tmp = tempDir("svc-pg");
  let db: TestDatabase;
  let rules: string;
  const procs: ServiceProc[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("svc");
    rules = writeRules(tmp.dir);
  });
  afterAll(async () => {
    for (const p of procs) await p.stop();
    await db?.drop();
    tmp.remove();
  });

  async function serve(): Promise<ServiceProc> {
    const p = await startServiceProcess(["--no-watch", "--config", rules, "--overrides", db.url, "--admin-token", TOKEN]);
    procs.push(p);
    return p;
  }

  it("a change made through one instance applies on the other within one second, and survives restarts", async () => {
    const [one, two] = await Promise.all([serve(), serve()]);
    // Both instances must be LISTENing before the write (it is what this test is about).
    await until(() => [one, two].every((p) => p.lines.some((l) => l.includes("LISTEN connection up"))), "both LISTEN", 750, 20);

    const put = await call(one.base, "PUT", "/v1/admin/overrides/api/user_id=4242", { token: TOKEN, body: { limits: tight } });
    expect(put.status).toBe(201);
    const tookMs = await until(
      async () => (await checkUser(two.base, "4242")).source === "override",
      "instance two applies the override",
      500,
      10,
    );
    expect(tookMs).toBeLessThan(1000);

    const block = await call(two.base, "POST", "/v1/admin/keys/api/user_id=4242/block", { token: TOKEN, body: { ttl: "1h" } });
    expect(block.status).toBe(200);
    const back = await until(
      async () => (await checkUser(one.base, "4242")).policy === "blocked",
      "instance one applies the block",
      500,
      10,
    );
    expect(back).toBeLessThan(1000);

    await Promise.all([one.stop(), two.stop()]);
    const three = await serve();
    expect(await checkUser(three.base, "4242")).toMatchObject({ allowed: false, policy: "blocked", source: "override" });
  });
});
