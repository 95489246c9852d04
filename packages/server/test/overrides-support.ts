/**
 * Helpers for the overrides tests: a throw-away PostgreSQL database (created with a unique
 * name on the machine's PostgreSQL at 127.0.0.1:5432, user postgres, trust auth; dropped
 * after), temp SQLite files, a rules file and HTTP calls to the service.
 *
 * Without a reachable PostgreSQL the PostgreSQL tests skip loudly, except under CI=true,
 * where they fail: tests that need a server must run in CI.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { INSTALL, skipOrFail } from "../../../test-support/outside.js";
import { OverrideCache } from "../src/overrides/cache.js";
import { openOverrideStore } from "../src/overrides/open.js";
import { SqliteOverrideStore } from "../src/overrides/sqlite.js";
import type { Override, OverrideStore } from "../src/overrides/types.js";
import type { ServeOptions, ServiceOverrides } from "../src/server.js";
import { serveRules, type InProcessService } from "./in-process.js";

export const PG_ADMIN_URL = process.env.RATEKEEPER_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * "run" when PostgreSQL answers at PG_ADMIN_URL. Nothing listening there counts as not installed
 * (a bare machine has nothing on 5432): one loud line and "skip", or a throw under CI=true.
 */
export async function postgresTestMode(): Promise<"run" | "skip"> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return "run";
  } catch (e) {
    return skipOrFail("PostgreSQL (overrides)", `cannot connect to ${PG_ADMIN_URL} (${(e as Error).message})`, INSTALL.postgres);
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
export async function pgQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
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
 * A SQLite overrides file `file` with two rows of domain `d`, `k=a` and `k=b` (1 a minute each),
 * then `k=a`'s stored policy replaced by `text` behind the store's back (a hand edit in the
 * database): what the tests of rows the library cannot read start from.
 */
export async function sqliteWithEditedRow(file: string, text: string): Promise<void> {
  const oneAMinute: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 1, window: "1m" }] };
  const store = new SqliteOverrideStore({ path: file });
  await store.put({ domain: "d", key: "k=a", policy: oneAMinute });
  await store.put({ domain: "d", key: "k=b", policy: oneAMinute });
  await store.close();
  const db = new Database(file);
  db.prepare("UPDATE ratekeeper_overrides SET policy = ? WHERE key = 'k=a'").run(text);
  db.close();
}

// ---------------------------------------------------------------------------------------------
// The service's rules and HTTP API, for the admin API and restart tests.

/** A tiny rules file: `api` domain, `user_id` descriptors at 100 a minute (overrides replace that). */
export const RULES_YAML = `domains:
  - domain: api
    descriptors:
      - key: user_id
        algorithm: fixed-window
        limit: 100
        window: 1m
`;

export function writeRules(dir: string): string {
  const file = path.join(dir, "rules.yaml");
  writeFileSync(file, RULES_YAML);
  return file;
}

/** One HTTP call; resolves status and parsed JSON body (or text). */
export async function call(
  base: string,
  method: string,
  urlPath: string,
  opts: { token?: string; body?: unknown; raw?: string } = {},
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  const body = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  const res = await fetch(`${base}${urlPath}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed };
}

/** POST /v1/check for one `user_id` descriptor in domain `api`. */
export async function checkUser(
  base: string,
  userId: string,
): Promise<{ allowed: boolean; limit: number | null; policy: string | null; source: string }> {
  const r = await call(base, "POST", "/v1/check", { body: { domain: "api", descriptors: [[{ key: "user_id", value: userId }]] } });
  if (r.status !== 200) throw new Error(`check failed: ${r.status} ${JSON.stringify(r.body)}`);
  const s = r.body.statuses[0];
  return { allowed: r.body.allowed, limit: s.limit, policy: s.policy, source: s.explain.source };
}

/**
 * The service in this process on {@link RULES_YAML}, with an overrides store opened at `url` (its
 * cache neither resyncs nor purges on a timer) and `options` (e.g. the admin token).
 */
export async function serveWithOverrides(
  url: string,
  options: Partial<ServeOptions>,
): Promise<{ svc: InProcessService; store: OverrideStore }> {
  const store = await openOverrideStore(url);
  const cache = await OverrideCache.start(store, { resyncIntervalMs: 0, purgeIntervalMs: 0 });
  const overrides: ServiceOverrides = {
    lookup: cache,
    store,
    async close() {
      cache.close();
      await store.close();
    },
  };
  return { svc: await serveRules(RULES_YAML, { ...options, overrides }), store };
}
