/**
 * The memory store's rebase (stores/memory-rebase.ts): a table whose clock runs for weeks or
 * months moves its base forward and shifts every kept time, so that each key's state still holds
 * small integers (V8 Smis, asked in a child process run with `--allow-natives-syntax`, as
 * memory-time.test.ts does), and every decision is still the Evaluator's on absolute time:
 * clocks that cross the rebase threshold many times, with jumps of days and steps back of up to
 * days, one to three limits of every algorithm, keys that expire and come back.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, resolveLimits, type LimitSpec, type LimitState } from "../src/index.js";
import { REBASE_AT } from "../src/stores/memory-rebase.js";
import { BEFORE_FIRST } from "../src/stores/memory-time.js";
import { rebaseSpecArb } from "./arbitraries.js";

const DAY = 86_400_000;
/** Windows (ms): awkward ones, long ones whose periods a rebase cannot keep (7 and 30 days). */
const specArb = rebaseSpecArb([7, 12, 60, 100, 1000, 60_000, 3_600_000, DAY - 1, DAY, 7 * DAY, 30 * DAY], 6, ["police", "shape"]);

/**
 * An op: kind, key, ms forward (often days: months in all), ms back first (up to days, or nearly
 * 2^30 ms: the step back a table keeps exact, counted from its newest reading), cost;
 * `near`: first jump to within 3 s before the table's next rebase, so that the next ops cross it
 * while keys are live (a rebase made on keys that all expired long ago tests little).
 */
const opArb = fc.record({
  near: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, fc.constant(true)),
  key: fc.nat(3),
  kind: fc.constantFrom("consume", "consume", "consume", "consume", "peek", "refund"),
  dt: fc.oneof(fc.constant(0), fc.nat(20), fc.nat(2_000), fc.nat(DAY), fc.integer({ min: DAY, max: 9 * DAY })),
  back: fc.oneof(
    { weight: 6, arbitrary: fc.constant(0) },
    fc.nat(1_000),
    fc.nat(3 * DAY),
    fc.integer({ min: BEFORE_FIRST - 2 * DAY, max: BEFORE_FIRST }),
  ),
  c: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
});

/** Start times: near the epoch (the table starts with base 0), awkward, around now, in 2100. */
const startArb = fc.oneof(
  fc.integer({ min: 0, max: 1_000_000 }),
  fc.integer({ min: 1_700_000_000_000, max: 1_700_000_000_000 + 30 * DAY }),
  fc.constant(1_764_236_401_237),
  fc.integer({ min: 4_102_444_800_000, max: 4_102_444_800_000 + DAY }),
);

type Op = { near?: boolean; key: number; kind: string; dt: number; back: number; c: number };
let rebases = 0;

/**
 * The Evaluator on absolute time against a table, with the store's expiry written out (as
 * memory-time.test.ts), over four keys; counts the rebases the table made (its base moved).
 */
function check([specs, t0, ops]: [LimitSpec[], number, Op[]]) {
  const limits = resolveLimits(specs);
  const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(limits, "rebase");
  const inner = table as unknown as { base: number; rebaseAt: number };
  const baseOf = () => inner.base;
  const ev = new Evaluator(limits);
  const keys = [0, 1, 2, 3].map(() => ({ st: ev.init(), exp: Number.NEGATIVE_INFINITY }));
  const capacity = Math.min(...limits.map((l) => l.capacity));
  let t = t0;
  let base = -1;
  let newest = t0;
  ops.forEach((op, i) => {
    const next = inner.base + inner.rebaseAt;
    if (op.near === true && Number.isFinite(next) && next > t) t = next - (op.dt % 3_000);
    t = Math.max(0, t + op.dt - op.back, newest - BEFORE_FIRST);
    newest = Math.max(newest, t);
    const c = Math.min(op.c, capacity);
    const k = keys[op.key] as { st: LimitState[]; exp: number };
    const live = t < k.exp;
    const at = `op ${i}: ${op.kind} k${op.key} at ${t} (start ${t0}, base ${baseOf()})`;
    if (op.kind === "consume") {
      if (!live) k.st = ev.init();
      const want = ev.run(k.st, t, c, true);
      if (want.allowed) k.exp = t + ev.ttlMs;
      expect(table.consume(`k${op.key}`, c, t), at).toEqual(want);
    } else if (op.kind === "peek") expect(table.peek(`k${op.key}`, c, t), at).toEqual(ev.run(live ? k.st : ev.init(), t, c, false));
    else {
      void table.refund(`k${op.key}`, c, t);
      if (live) ev.refund(k.st, t, c);
    }
    if (base >= 0 && baseOf() !== base) rebases++;
    base = baseOf();
  });
}

describe("memory store: a rebase keeps every decision of the Evaluator on absolute time", () => {
  it("clocks that run for months across the rebase threshold, jump days, step back days; one to three limits", () => {
    rebases = 0;
    const arb = fc.tuple(fc.array(specArb, { minLength: 1, maxLength: 3 }), startArb, fc.array(opArb, { minLength: 10, maxLength: 60 }));
    fc.assert(fc.property(arb, check), { numRuns: 1_500 });
    // The real code path ran, many times (each run's clock crosses about 6 days per rebase).
    expect(rebases).toBeGreaterThan(2_000);
  });

  it("a key decided every few minutes for 90 days: the base moves every few days, decisions stay the reference's", () => {
    const specs: LimitSpec[] = [
      { algorithm: "sliding-window", limit: 3, window: 60_000, buckets: 4 },
      { algorithm: "fixed-window", limit: 5, window: 3_600_000 },
    ];
    rebases = 0;
    const ops: Op[] = [];
    for (let i = 0; i < 3_000; i++)
      ops.push({ key: i % 4, kind: i % 7 === 0 ? "peek" : "consume", dt: 2_600_000, back: i % 13 === 0 ? 90_000 : 0, c: 1 });
    check([specs, 1_764_236_401_237, ops]);
    expect(rebases).toBeGreaterThanOrEqual(10);
  });

  it("a sliding window's units in sub-windows just before the new base still count for a step back to them", () => {
    // Key 2's reading sets the base; key 0 fills its window `pre` ms later; key 1's reading 2^30 ms
    // (and `late`) after that rebases; key 0 is asked again 2^30 ms back, where its units still
    // count (in full, or in part: a weighted window counts the sub-window before the window). The
    // shift must keep the sub-windows that hold them at or above 0 (decide() counts none below):
    // `pre` moves key 0's sub-window against the period (5 sub-windows), `late` moves the cut.
    const specs: LimitSpec[] = [{ algorithm: "sliding-window", limit: 3, window: 60_000, buckets: 4 }];
    for (let pre = 0; pre < 75_000; pre += 2_500) {
      for (let late = 1_000; late < 75_000; late += 3_000) {
        const ops: Op[] = [
          { key: 2, kind: "consume", dt: 0, back: 0, c: 1 },
          { key: 0, kind: "consume", dt: pre, back: 0, c: 3 },
          { key: 1, kind: "consume", dt: BEFORE_FIRST + late, back: 0, c: 1 },
          { key: 0, kind: "consume", dt: 0, back: BEFORE_FIRST, c: 1 },
          { key: 0, kind: "peek", dt: 9_000, back: 0, c: 1 },
          { key: 0, kind: "consume", dt: 30_000, back: 0, c: 2 },
        ];
        check([specs, 1_764_236_401_237, ops]);
      }
    }
  });

  it("the pass over the keys runs about once every 6.2 days, never for a table that cannot rebase", () => {
    const passes = (spec: LimitSpec) => {
      const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits([spec]), "passes");
      const sweep = vi.spyOn(table as unknown as { sweep: (now: number) => number }, "sweep");
      for (let t = 1_764_236_401_237, end = t + 60 * DAY; t < end; t += 3_600_000) void table.consume(`k${t % 7}`, 1, t);
      return sweep.mock.calls.length;
    };
    // 60 days: the first rebase 18.6 - 12.4 = 6.2 days on (the first base lies 12.4 days back), then every 6.2.
    expect(passes({ algorithm: "fixed-window", limit: 5, window: 1_000 })).toBe(9);
    // A clock-aligned week: its period is over 2^28 ms; known when its first reading sets the base, so never.
    expect(passes({ algorithm: "fixed-window", limit: 5, window: 7 * DAY })).toBe(0);
  });

  it("the threshold leaves room: a rebase triggers before relative times reach 2^31", () => {
    expect(REBASE_AT).toBeLessThan(2 ** 31 - 2 ** 28);
  });
});

const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/**
 * In a child process: 20,000 decisions on 64 keys of a table of `specs`, the clock moving 260 s
 * a step (60 days in all) and now and then 250 ms back; then whether each of `a`, `b` (and the
 * key's `exp`) is a Smi in every key's slots.
 */
function smisAfter60Days(specs: LimitSpec[]): Record<string, boolean> {
  const script = `import { MemoryStore, resolveLimits } from ${JSON.stringify(LIB)};
const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(${JSON.stringify(specs)}), "smi");
let t = 1_764_236_401_237;
for (let i = 0; i < 20_000; i++) {
  t += i % 97 === 0 ? -250 : 260_000;
  for (let j = 0; j < 3; j++) table.consume("k" + (i % 64), 1, t + j);
  if (i % 50 === 0) table.peek("k" + (i % 64), 1, t);
  if (i % 77 === 0) table.refund("k" + (i % 64), 1, t);
}
const seen = { a: true, b: true, exp: true, days: Math.round((t - 1_764_236_401_237) / 86_400_000) };
for (let k = 0; k < 64; k++) {
  const e = table.young.get("k" + k) ?? table.old.get("k" + k);
  if (e === undefined) continue;
  seen.exp = seen.exp && %IsSmi(e.exp);
  for (const s of e.s ?? [e]) {
    seen.a = seen.a && %IsSmi(s.a);
    seen.b = seen.b && %IsSmi(s.b);
  }
}
process.stdout.write(JSON.stringify(seen));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as Record<string, boolean>;
}

describe("memory store: after 60 days of a clock, each key's state still holds small integers (V8 Smis)", () => {
  const cases: [string, LimitSpec[]][] = [
    ["fixed window", [{ algorithm: "fixed-window", limit: 50, window: 1_000 }]],
    ["fixed window from the first request", [{ algorithm: "fixed-window", limit: 50, window: 1_000, align: "first-request" }]],
    ["token bucket of an hour", [{ algorithm: "token-bucket", limit: 50, window: "1h" }]],
    ["GCRA", [{ algorithm: "gcra", limit: 50, window: 1_000, burst: 10 }]],
    ["sliding window of one sub-window", [{ algorithm: "sliding-window", limit: 5, window: 100 }]],
    ["sliding window of four sub-windows", [{ algorithm: "sliding-window", limit: 20, window: 400, buckets: 4 }]],
    ["sliding log", [{ algorithm: "sliding-log", limit: 20, window: 1_000 }]],
    [
      "three limits",
      [
        { algorithm: "fixed-window", limit: 50, window: 1_000 },
        { algorithm: "sliding-window", limit: 500, window: 60_000, buckets: 3 },
        { algorithm: "gcra", limit: 50, window: "1h", burst: 10 },
      ],
    ],
  ];
  it.each(cases)("%s", (_name, specs) => {
    expect(smisAfter60Days(specs)).toEqual({ a: true, b: true, exp: true, days: 60 });
  });
});
