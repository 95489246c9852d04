/**
 * Admin writes racing each other: between the admin API's read of an override and its change,
 * another admin (through this instance or another) may change the same key. A route that acts
 * on what it read must not then undo the other admin's write. The interleaving is made
 * deterministic by a store whose `get` lets a second write land before it answers.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openOverrideStore } from "../src/overrides/open.js";
import type { Override, OverrideStore } from "../src/overrides/types.js";
import { createAdminHandler } from "../src/transport/admin.js";
import { call, createTestDatabase, postgresTestMode, tempDir, type TestDatabase } from "./overrides-support.js";

const pgMode = await postgresTestMode();
const TOKEN = "admin-races-token-0123456789";
const tenASecond: Override["policy"] = { limits: [{ algorithm: "fixed-window", limit: 10, window: "1s" }] };

function backend(name: string, open: () => Promise<{ url: string; teardown(): Promise<void> }>, skip = false): void {
  describe.skipIf(skip)(`admin writes racing: ${name}`, () => {
    let store: OverrideStore;
    let server: Server;
    let base: string;
    let teardown: () => Promise<void>;
    /** Run once, by the next `get`, after it read and before it answers. */
    let beforeGetAnswers: (() => Promise<unknown>) | undefined;

    beforeAll(async () => {
      const o = await open();
      teardown = () => o.teardown();
      store = await openOverrideStore(o.url);
      const racing = new Proxy(store, {
        get(target, prop, receiver) {
          if (prop !== "get") return Reflect.get(target, prop, receiver) as unknown;
          return async (domain: string, key: string) => {
            const read = await target.get(domain, key);
            const between = beforeGetAnswers;
            beforeGetAnswers = undefined;
            await between?.();
            return read;
          };
        },
      });
      const handler = createAdminHandler({ token: TOKEN, overrides: racing });
      server = createServer((req, res) => void handler(req, res));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await new Promise((r) => server?.close(r));
      await store?.close();
      await teardown?.();
    });

    it("unblock does not delete the override another admin put in place of the block meanwhile", async () => {
      await store.put({ domain: "api", key: "user_id=7", policy: "blocked" });
      beforeGetAnswers = () => store.put({ domain: "api", key: "user_id=7", policy: tenASecond, note: "the other admin" });
      const r = await call(base, "POST", "/v1/admin/keys/api/user_id=7/unblock", { token: TOKEN });
      expect(await store.get("api", "user_id=7")).toMatchObject({ policy: tenASecond, note: "the other admin" });
      expect(r.status).toBe(404);
    });
  });
}

backend("SQLite", async () => {
  const dir = tempDir("admin-races");
  return { url: `sqlite:${dir.file("o.db")}`, teardown: async () => dir.remove() };
});

backend(
  "PostgreSQL",
  async () => {
    const db: TestDatabase = await createTestDatabase("races");
    return { url: db.url, teardown: () => db.drop() };
  },
  pgMode === "skip",
);
