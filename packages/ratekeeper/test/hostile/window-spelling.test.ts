/**
 * A limit's default name is `<limit>-per-<window>`, and it is sent in the limit headers of every
 * answer (`RateLimit-Policy: "5-per-1s";q=5;w=1`). parseDuration accepts a window with spaces
 * around it (any Unicode space: `\s`, line terminators included) and leading zeros; written into
 * the name as given, a window of "1s\n", "1s\u2028" or "\ufeff1s" put characters no header may
 * carry into it (node:http throws: the middleware and the service failed every answer), and
 * "000...01s" an unbounded name (headers past what clients read). The default name now spells
 * the window canonically: the number without leading zeros, then the unit.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { RateLimiter, resolveLimits, type Duration } from "../../src/index.js";
import { HeaderWriter } from "../../src/http/index.js";

const SPELLINGS = ["1s\n", "1s\u2028", "\ufeff1s", " 1s ", "\t1 s", `${"0".repeat(5000)}1s`, "1s"];

describe("a window's spelling in the default limit name", () => {
  it.each(SPELLINGS.map((w) => [JSON.stringify(w).slice(0, 20), w]))("%s: the name is 5-per-1s", (_, window) => {
    const [l] = resolveLimits([{ algorithm: "fixed-window", limit: 5, window }]);
    expect(l?.name).toBe("5-per-1s");
    expect(l?.windowMs).toBe(1000);
  });

  it("minutes, hours, days and ms keep their unit", () => {
    const names = ["0500ms", " 10s", "01m\n", "2h", "1d"].map(
      (window) => resolveLimits([{ algorithm: "fixed-window", limit: 3, window }])[0]?.name,
    );
    expect(names).toEqual(["3-per-500ms", "3-per-10s", "3-per-1m", "3-per-2h", "3-per-1d"]);
  });

  it("node:http sends the headers of a limiter whose window was written with a line terminator", async () => {
    // Not a Duration by its type: a rules file or JSON hands such strings over all the same.
    const limiter = new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1s\u2028" as Duration });
    const writer = new HeaderWriter([...limiter.limits], ["ietf"]);
    const server = createServer((req, res) => {
      void limiter.consume("k").then((d) => {
        try {
          const pairs: [string, string][] = [];
          writer.write(d, Date.now(), pairs);
          for (const [k, v] of pairs) res.setHeader(k, v);
          res.end("ok");
        } catch (e) {
          res.statusCode = 500;
          res.end(String(e));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect([res.status, await res.text(), res.headers.get("ratelimit-policy")]).toEqual([200, "ok", '"5-per-1s";q=5;w=1']);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
