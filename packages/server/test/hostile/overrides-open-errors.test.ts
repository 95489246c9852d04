/**
 * An overrides store that cannot be opened (nothing listening, a database that does not exist, a
 * SQLite file whose folder cannot be made) stops `serve` and the `overrides` commands with one
 * line naming `--overrides`, the store (its password removed), the cause and what to check: exit
 * 1, no stack trace, never the password. (It was a raw stack trace: "ratekeeper: Error: connect
 * ECONNREFUSED ..." and eight "at" lines.) The service refuses to start rather than start without
 * its overrides: they hold blocks, and starting without them would lift every block.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../../../test-support/process.js";
import { createTestDatabase, postgresTestMode } from "../overrides-support.js";
import { CLI } from "../support.js";

const dir = mkdtempSync(path.join(tmpdir(), "rk-open-errors-"));
const rules = path.join(dir, "rules.yaml");
writeFileSync(
  rules,
  "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: gcra\n        limit: 5\n        window: 1s\n",
);
const notAFolder = path.join(dir, "file");
writeFileSync(notAFolder, "x");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    env: { ...process.env, RATEKEEPER_ADMIN_TOKEN: "", RATEKEEPER_OVERRIDES: "" },
    // A store wrongly opened starts the service, which runs until this kills it. SIGKILL: a
    // process stuck in a synchronous loop never runs the service's SIGTERM handler.
    timeout: 30_000,
    killSignal: "SIGKILL",
  });
  return { status: r.status, stderr: r.stderr };
}

const serve = (url: string) => run(["serve", "--config", rules, "--port", "0", "--grpc-port", "0", "--no-watch", "--overrides", url]);

function expectOneLine(r: { status: number | null; stderr: string }, prefix: string, cause: RegExp, hint: RegExp): void {
  expect(r.status, r.stderr).toBe(1);
  const line = r.stderr.split("\n").find((l) => l.startsWith(prefix));
  expect(line, r.stderr).toBeDefined();
  expect(line).toMatch(cause);
  expect(line).toMatch(hint);
  expect(r.stderr).not.toMatch(/^\s+at /m); // no stack trace
  expect(r.stderr).not.toContain("s3cret");
}

describe("an overrides store that cannot be opened", () => {
  it("PostgreSQL with nothing listening: serve and overrides export say so in one line, exit 1, password hidden", async () => {
    const url = `postgres://admin:s3cret@127.0.0.1:${await freePort()}/rk`;
    for (const [r, prefix] of [
      [serve(url), "ratekeeper serve: --overrides postgres://admin:***@127.0.0.1:"],
      [run(["overrides", "export", "--overrides", url]), "ratekeeper overrides export: --overrides postgres://admin:***@127.0.0.1:"],
      [run(["overrides", "import", "-", "--overrides", url]), "ratekeeper overrides import: --overrides postgres://admin:***@127.0.0.1:"],
    ] as const) {
      expectOneLine(r, prefix, /cannot open the overrides store: connect ECONNREFUSED/, /is PostgreSQL running/);
    }
  }, 60_000);

  it("a SQLite file whose folder cannot be made (a file is in the way)", () => {
    const r = serve(`sqlite:${path.join(notAFolder, "sub", "overrides.db")}`);
    expectOneLine(
      r,
      `ratekeeper serve: --overrides sqlite:${notAFolder}`,
      /cannot open the overrides store: .*ENOTDIR/,
      /folder exists or can be created/,
    );
  }, 30_000);

  it.skipIf(!existsSync("/proc/self"))(
    "a SQLite file under /proc (Node's recursive mkdir spun there forever, the event loop blocked)",
    () => {
      const r = serve("sqlite:/proc/ratekeeper-nope/overrides.db");
      expectOneLine(
        r,
        "ratekeeper serve: --overrides sqlite:/proc/ratekeeper-nope/overrides.db",
        /ENOENT/,
        /folder exists or can be created/,
      );
    },
    60_000,
  );
});

const pgMode = await postgresTestMode();

describe.skipIf(pgMode === "skip")("an overrides store that cannot be opened, on the machine's PostgreSQL", () => {
  it("a database that does not exist: named, with what to do", async () => {
    const db = await createTestDatabase("open_errors");
    await db.drop(); // a name that surely does not exist now
    const r = serve(db.url);
    expectOneLine(
      r,
      "ratekeeper serve: --overrides postgres://",
      new RegExp(`database "${db.name}" does not exist`),
      /create the database first/,
    );
  }, 30_000);
});
