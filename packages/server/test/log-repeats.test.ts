/**
 * The service's logger counts lines that repeat an `errorId` already written with the same message
 * (log-repeats.ts), and error ids are shared by failures of one kind for 10 s (error-id.ts). On a
 * manual clock: the count lines per interval, the interval's end, and what is never counted.
 */
import { Writable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { closeLog, createLogger } from "../src/log.js";
import { errorIdField } from "../src/http-io.js";
import { REPEAT_WINDOW_MS, sharedErrorId } from "../src/service/error-id.js";

beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
afterEach(() => vi.useRealTimers());

function captured(): { lines: Record<string, unknown>[]; log: ReturnType<typeof createLogger> } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, log: createLogger("info", sink) };
}

describe("repeated failure lines", () => {
  it("writes the first line of an errorId, then one count per interval while it repeats, then forgets it", () => {
    const { lines, log } = captured();
    for (let i = 0; i < 5; i++) log.error({ err: new Error("x"), errorId: "aaa" }, "request failed");
    expect(lines.map((l) => l.msg)).toEqual(["request failed"]);
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    expect(lines.slice(1)).toMatchObject([
      {
        level: 50,
        errorId: "aaa",
        repeats: "request failed",
        suppressed: 4,
        seconds: 10,
        msg: "request failed: 4 more like this in the last 10 s (same errorId)",
      },
    ]);
    log.error({ errorId: "aaa" }, "request failed");
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    expect(lines.slice(2)).toMatchObject([{ suppressed: 1 }]);
    // An interval with no repeat: nothing written, and the id forgotten: a line with it again is
    // written in full (an id is shared for 10 s only, so this is a late one).
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    expect(lines).toHaveLength(3);
    log.error({ errorId: "aaa" }, "request failed");
    expect(lines.at(-1)?.msg).toBe("request failed");
  });

  it("never counts a line without an errorId, nor one with another message or level", () => {
    const { lines, log } = captured();
    log.error({ errorId: "b" }, "request failed");
    log.error({ errorId: "b" }, "ShouldRateLimit failed");
    log.warn({ errorId: "b" }, "request failed");
    log.info({ port: 1 }, "listening");
    log.info({ port: 1 }, "listening");
    log.error({ errorId: "c" }, "request failed");
    expect(lines).toHaveLength(6);
  });

  it("closeLog writes the counts not yet written", async () => {
    const { lines, log } = captured();
    log.error({ errorId: "d" }, "admin request failed");
    log.error({ errorId: "d" }, "admin request failed");
    await closeLog(log);
    expect(lines.at(-1)).toMatchObject({
      errorId: "d",
      suppressed: 1,
      msg: "admin request failed: 1 more like this in the last 1 s (same errorId)",
    });
  });
});

describe("a wall clock set back (NTP stepping it an hour, a VM restored)", () => {
  it("neither keeps an id shared past its 10 s nor keeps counting a line under it", () => {
    const kind = "the store failed: SQLite timed out";
    const a = sharedErrorId(kind);
    const { lines, log } = captured();
    log.error({ errorId: "e" }, "request failed");
    vi.setSystemTime(Date.now() - 3_600_000);
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    expect(sharedErrorId(kind)).not.toBe(a);
    // The line's interval is over too: forgotten, so the same line again is written in full.
    vi.advanceTimersByTime(REPEAT_WINDOW_MS);
    log.error({ errorId: "e" }, "request failed");
    expect(lines.map((l) => l.msg)).toEqual(["request failed", "request failed"]);
  });
});

describe("shared error ids", () => {
  it("one id per kind of failure for REPEAT_WINDOW_MS from its first use, then a new one", () => {
    const a = sharedErrorId("the store failed: Redis is unavailable (ECONNREFUSED)");
    expect(a).toMatch(/^[0-9a-f]{12}$/);
    expect(sharedErrorId("the store failed: Redis timed out")).not.toBe(a);
    vi.advanceTimersByTime(REPEAT_WINDOW_MS - 1);
    expect(sharedErrorId("the store failed: Redis is unavailable (ECONNREFUSED)")).toBe(a);
    vi.advanceTimersByTime(1);
    expect(sharedErrorId("the store failed: Redis is unavailable (ECONNREFUSED)")).not.toBe(a);
  });

  it("two bugs with the same class and message, thrown at different places, are two kinds: each is written in full", () => {
    // A message such as "Cannot read properties of undefined (reading 'length')" is no bug's own:
    // sharing one id would count the second bug's failures as the first's, its stack never written.
    const inParse = (): Error => new TypeError("Cannot read properties of undefined (reading 'length')");
    const inReply = (): Error => new TypeError("Cannot read properties of undefined (reading 'length')");
    const { lines, log } = captured();
    const fail = (e: Error): void => log.error({ err: e, ...errorIdField(e) }, "request failed");
    for (const make of [inParse, inParse, inReply, inReply, inParse]) fail(make());
    const written = lines.map((l) => l.errorId);
    expect(written).toHaveLength(2);
    expect(written[0]).not.toBe(written[1]);
    expect(lines.map((l) => (l.err as { stack: string }).stack.split("\n")[1])).toEqual([
      expect.stringContaining("inParse"),
      expect.stringContaining("inReply"),
    ]);
  });

  it("one place reached at another position of a Promise.all (a batch's descriptors) is one kind", async () => {
    // V8's async frames name the position ("at async Promise.all (index 2)"): a bug hit by
    // whichever descriptor of a batch would otherwise be a kind (and a full line) per position.
    const decideOne = async (i: number, failAt: number): Promise<void> => {
      await Promise.resolve();
      if (i === failAt) throw new TypeError("Cannot read properties of undefined (reading 'limit')");
    };
    const batch = async (failAt: number): Promise<Error> =>
      Promise.all([0, 1, 2, 3].map((i) => decideOne(i, failAt))).then(
        () => new Error("no failure"),
        (e: unknown) => e as Error,
      );
    const errors = [await batch(0), await batch(2), await batch(3)];
    expect(errors[1]?.stack).toContain("(index 2)");
    const ids = errors.map((e) => errorIdField(e).errorId);
    expect(new Set(ids).size).toBe(1);
  });
});
