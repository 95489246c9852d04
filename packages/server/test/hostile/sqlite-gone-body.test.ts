/**
 * What an admin writing overrides is told when the SQLite file, or its -wal or -shm, was deleted
 * or replaced while open. 5eba906 keeps the file's path (and the store's text) out of the 503
 * body, and said the same for all three: "SQLite refused the call (its file was deleted or
 * replaced while open)". The advice that matters went to the log only: with nothing left under
 * the name, a restart starts from an empty database and every override, blocks too, is gone; a
 * deleted -wal or -shm asks for the other processes to stop before the restart. The body now
 * says which it is and what to do, in the service's own words (no path).
 */
import { copyFileSync, mkdtempSync, renameSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import { SqliteOverrideStore } from "../../src/overrides/sqlite.js";
import { StoreFailure } from "../../src/service/types.js";

const dirs: string[] = [];
const stores: SqliteOverrideStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const blocked = (key: string) => ({ domain: "api", key, policy: "blocked" as const });

async function bodyAfter(spoil: (file: string) => void): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), "rk-sqlite-body-"));
  dirs.push(dir);
  const file = path.join(dir, "overrides.db");
  const store = new SqliteOverrideStore({ path: file });
  stores.push(store);
  await store.put(blocked("user_id=1"));
  spoil(file);
  const e = await store.put(blocked("user_id=2")).then(
    () => undefined,
    (err: unknown) => err,
  );
  const message = new StoreFailure("overrides database", e, store).message;
  expect(message).not.toContain(dir);
  return message;
}

it("nothing left under the name: the body says a restart would lose every override", async () => {
  const body = await bodyAfter((f) => {
    for (const x of [f, `${f}-wal`, `${f}-shm`]) rmSync(x, { force: true });
  });
  expect(body).toMatch(/SQLite refused the call \(its file was deleted while open and nothing is there now: .*restart .*empty database/);
});

it("replaced by another file: restore it, or restart to open the one there", async () => {
  const body = await bodyAfter((f) => {
    copyFileSync(f, `${f}.copy`);
    unlinkSync(f);
    renameSync(`${f}.copy`, f);
  });
  expect(body).toMatch(/SQLite refused the call \(its file was deleted or replaced while open: restore it, or restart/);
});

it("its -wal deleted: stop the other processes using it, then restart", async () => {
  const body = await bodyAfter((f) => rmSync(`${f}-wal`));
  expect(body).toMatch(/SQLite refused the call \(its write-ahead log or shared-memory index was deleted or replaced while open: stop/);
});
