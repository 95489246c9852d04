/** parseTraffic: a user's CSV or access log into simulator traffic; every bad line is named with its field. */
import { describe, expect, it } from "vitest";
import { RateLimitConfigError } from "../src/index.js";
import { formatTable, parseTraffic, simulate } from "../src/simulate/index.js";

const rows = (t: ReturnType<typeof parseTraffic>) =>
  Array.from(t.timesMs, (ms, i) => [ms, t.keys[t.keyIds[i]!], t.costs ? t.costs[i] : 1] as const);

function errorOf(f: () => unknown): RateLimitConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(RateLimitConfigError);
    return e as RateLimitConfigError;
  }
  throw new Error("did not throw");
}

describe("parseTraffic: CSV", () => {
  it("reads time,key lines with no header: epoch ms, epoch seconds with a fraction, ISO 8601; sorts by time", () => {
    const t = parseTraffic("1767225600500,alice\n1767225600.25,bob\n# a comment\n\n2026-01-01T00:00:01.000Z,alice\n", { name: "x.csv" });
    expect(rows(t)).toEqual([
      [1767225600250, "bob", 1],
      [1767225600500, "alice", 1],
      [1767225601000, "alice", 1],
    ]);
    expect(t.keys).toEqual(["alice", "bob"]);
    expect(t.startMs).toBe(1767225600250);
    expect(t.description).toBe("CSV");
  });

  it("takes columns from a header in any order, with costs and quoted keys", () => {
    const t = parseTraffic('cost,key,timestamp\n3,"a,b",10\n1,"say ""hi""",20\n,plain,30\r\n', { timeUnit: "ms" });
    expect(rows(t)).toEqual([
      [10, "a,b", 3],
      [20, 'say "hi"', 1],
      [30, "plain", 1],
    ]);
  });

  it("small plain numbers are seconds unless timeUnit says ms", () => {
    expect(rows(parseTraffic("0.5,a\n2,a\n"))).toEqual([
      [500, "a", 1],
      [2000, "a", 1],
    ]);
    expect(rows(parseTraffic("5,a\n", { timeUnit: "ms" }))).toEqual([[5, "a", 1]]);
  });

  it("names the line and the field of every bad line", () => {
    const e = errorOf(() => parseTraffic('time,key,cost\n12:00,a\n100,,1\n200,b,0\n300,"c\n400,d,2.5\n', { name: "t.csv" }));
    expect(e.message.split("\n").slice(1)).toEqual([
      '  t.csv:2: time: not a time (got "12:00"; use epoch milliseconds, seconds, or ISO 8601)',
      "  t.csv:3: key: is missing (expected time,key[,cost])",
      '  t.csv:4: cost: must be a whole number from 1 to 1000000000 (got "0")',
      "  t.csv:5: line: has an unclosed double quote",
      '  t.csv:6: cost: must be a whole number from 1 to 1000000000 (got "2.5")',
    ]);
  });

  it("a header missing a column, an empty file, and a flood of bad lines (listed up to 20)", () => {
    expect(errorOf(() => parseTraffic("time,cost\n1,1\n")).message).toBe(
      "traffic:1: header: names no key column (key, client, ip, user or address)",
    );
    expect(errorOf(() => parseTraffic("\n# nothing\n", { name: "e.csv" })).message).toMatch(/e\.csv: has no requests/);
    const e = errorOf(() => parseTraffic(Array.from({ length: 50 }, () => "x,y").join("\n")));
    expect(e.issues).toHaveLength(21);
    expect(e.issues[20]).toEqual({ path: "traffic", message: "30 more bad lines not listed" });
  });

  it("bad options name the option", () => {
    expect(errorOf(() => parseTraffic("1,a", { format: "json" as never, timeUnit: "us" as never })).issues.map((i) => i.path)).toEqual([
      "format",
      "timeUnit",
    ]);
  });
});

describe("parseTraffic: access logs", () => {
  const log = [
    '203.0.113.7 - - [01/Jan/2026:00:00:02 +0000] "GET /a HTTP/1.1" 200 12 "-" "curl/8"',
    '198.51.100.2 - frank [31/Dec/2025:19:00:01 -0500] "POST /login HTTP/1.1" 401 0',
    '203.0.113.7 - - [01/Jan/2026:00:00:02.250 +0000] "GET /b HTTP/1.1" 200 12',
  ].join("\n");

  it("reads the Common and Combined Log Formats: the key is the client address, times with their zone", () => {
    const t = parseTraffic(log, { name: "access.log" });
    expect(rows(t)).toEqual([
      [Date.UTC(2026, 0, 1, 0, 0, 1), "198.51.100.2", 1],
      [Date.UTC(2026, 0, 1, 0, 0, 2), "203.0.113.7", 1],
      [Date.UTC(2026, 0, 1, 0, 0, 2, 250), "203.0.113.7", 1],
    ]);
    expect(t.description).toBe("access log (key: client address)");
  });

  it("the table names the file once, and counts the requests once", () => {
    const traffic = parseTraffic("1767225600500,alice\n1767225601000,bob\n", { name: "x.csv" });
    const lines = formatTable(simulate({ limit: 5, window: "1m", traffic, algorithms: [{ algorithm: "gcra" }] })).split("\n");
    expect(lines[0]).toBe("x.csv: CSV");
    expect(lines[1]).toMatch(/^2 requests, 2 keys, over /);
  });

  it("names bad lines and bad times", () => {
    const e = errorOf(() =>
      parseTraffic(`${log}\nnot a log line\n1.2.3.4 - - [32/Foo/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1`, { name: "access.log" }),
    );
    expect(e.issues.map((i) => i.path)).toEqual(["access.log:4: line", "access.log:5: time"]);
    expect(e.issues[1]!.message).toMatch(/not a time \(got "32\/Foo\/2026:00:00:00 \+0000"/);
  });

  it("format: csv reads a log-looking file as CSV (and says why each line fails)", () => {
    expect(errorOf(() => parseTraffic(log, { format: "csv" })).issues[0]!.path).toBe("traffic:1: time");
  });
});
