/**
 * Helpers for the overrides tests: a throw-away PostgreSQL database (created with a unique
 * name on the machine's PostgreSQL at 127.0.0.1:5432, user postgres, trust auth; dropped
 * after), temp SQLite files, and polling.
 *
 * Without a reachable PostgreSQL the PostgreSQL tests skip loudly, except under CI=true,
 * where they fail (RULES.md: tests needing a server must run in CI).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";

export const PG_ADMIN_URL = process.env.RATEKEEPER_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** "run" when PostgreSQL answers; otherwise throws under CI=true, or warns loudly and returns "skip". */
export async function postgresTestMode(): Promise<"run" | "skip"> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return "run";
  } catch (e) {
    if (process.env.CI === "true") {
      throw new Error(`PostgreSQL is not reachable at ${PG_ADMIN_URL} and CI=true: the overrides tests must run under CI (${(e as Error).message})`);
    }
    const bar = "!".repeat(72);
    console.warn(
      `\n${bar}\n!!! SKIPPING PostgreSQL overrides tests: cannot connect to ${PG_ADMIN_URL}\n!!! (${(e as Error).message}). Under CI=true they fail instead.\n${bar}\n`,
    );
    return "skip";
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A database of its own, dropped by `drop()` (which also ends every session still in it). */
export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  drop(): Promise<void>;
}

/** Creates a database with a unique name. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const name = `rk_${label}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`.toLowerCase();
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return {
    name,
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Runs one query on a fresh connection to `url`. */
export async function pgQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

/** A temp folder, removed by `remove()`. */
export function tempDir(label: string): { dir: string; file(name: string): string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), `rk-${label}-`));
  return { dir, file: (name) => path.join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Polls `probe` every `everyMs` until it returns true or `maxMs` passes; resolves how long it
 * took, or rejects naming `what`. Bounded: never waits forever.
 */
export async function pollUntil(what: string, probe: () => boolean | Promise<boolean>, maxMs: number, everyMs = 10): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await probe()) return performance.now() - start;
    if (performance.now() - start > maxMs) throw new Error(`${what}: not within ${maxMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
