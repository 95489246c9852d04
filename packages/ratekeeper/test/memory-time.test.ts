/**
 * The memory store's tables hand their algorithms time relative to a base (stores/memory-time.ts)
 * so that each key's state holds small integers: the decisions are still those of the Evaluator
 * on absolute time, for clocks at awkward instants (no multiple of any window), clocks that step
 * back (by up to days), several limits with different windows (the base is a multiple of all
 * their periods) and periods too long to align to (base 0); and V8 keeps the state's fields as
 * small integers (Smis), asked in child processes run with `--allow-natives-syntax` on the built
 * library (as string-prototype.test.ts does).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Evaluator } from "../src/core/evaluate.js";
import { MemoryStore, resolveLimits, type LimitSpec, type LimitState, type ResolvedLimit } from "../src/index.js";
import { baseFor, BEFORE_FIRST } from "../src/stores/memory-time.js";

const DAY = 86_400_000;
const windowArb = fc.constantFrom(7, 12, 60, 100, 1000, 60_000, 3_600_000, DAY - 1, DAY, 7 * DAY, 30 * DAY);

const specArb: fc.Arbitrary<LimitSpec> = fc.oneof(
  fc.record({
    algorithm: fc.constant("fixed-window" as const),
    limit: fc.integer({ min: 1, max: 6 }),
    window: windowArb,
    align: fc.constantFrom("clock" as const, "first-request" as const),
  }),
  fc
    .record({ limit: fc.integer({ min: 1, max: 6 }), sub: windowArb, buckets: fc.integer({ min: 1, max: 6 }), weighted: fc.boolean() })
    .map(({ limit, sub, buckets, weighted }) => ({
      algorithm: "sliding-window" as const,
      limit,
      window: sub * buckets,
      buckets,
      weighted,
    })),
  fc.record({ algorithm: fc.constant("sliding-log" as const), limit: fc.integer({ min: 1, max: 6 }), window: windowArb }),
  fc.record({ algorithm: fc.constant("token-bucket" as const), limit: fc.integer({ min: 1, max: 6 }), window: windowArb }),
  fc.record({ algorithm: fc.constant("gcra" as const), limit: fc.integer({ min: 1, max: 6 }), window: windowArb, burst: fc.nat(4) }),
  fc.record({
    algorithm: fc.constant("leaky-bucket" as const),
    limit: fc.integer({ min: 1, max: 6 }),
    window: windowArb,
    mode: fc.constantFrom("police" as const, "shape" as const),
  }),
);

/** An op: kind, key, ms forward, ms back first (mostly none; up to days), cost. */
const opArb = fc.record({
  key: fc.nat(2),
  kind: fc.constantFrom("consume", "consume", "consume", "consume", "peek", "refund"),
  dt: fc.oneof(fc.constant(0), fc.nat(20), fc.nat(2_000), fc.nat(2 * DAY)),
  back: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, fc.nat(1_000), fc.nat(3 * DAY)),
  c: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
});

/** Start times: no multiple of any window (odd, ...7 ms past a second), around now, or in 2100. */
const startArb = fc.oneof(
  fc.integer({ min: 1_700_000_000_000, max: 1_700_000_000_000 + 30 * DAY }),
  fc.constant(1_764_236_401_237),
  fc.integer({ min: 4_102_444_800_000, max: 4_102_444_800_000 + DAY }),
);

/**
 * The Evaluator on absolute time against a table, with the store's expiry written out (as
 * memory-kinds.test.ts), over three keys: a key first seen after the clock stepped back before
 * the table's first reading decides from a fresh state there.
 */
function check([specs, t0, ops]: [LimitSpec[], number, { key: number; kind: string; dt: number; back: number; c: number }[]]) {
  const limits = resolveLimits(specs);
  const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(limits, "time");
  const ev = new Evaluator(limits);
  const keys = [0, 1, 2].map(() => ({ st: ev.init(), exp: Number.NEGATIVE_INFINITY }));
  const capacity = Math.min(...limits.map((l) => l.capacity));
  let t = t0;
  ops.forEach((op, i) => {
    t = t + op.dt - op.back;
    const c = Math.min(op.c, capacity);
    const k = keys[op.key] as { st: LimitState[]; exp: number };
    const live = t < k.exp;
    const at = `op ${i}: ${op.kind} k${op.key} at ${t} (start ${t0})`;
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
  });
}

describe("memory store: time relative to the table's base decides as absolute time", () => {
  it("one to three limits, awkward start times, clocks that step back by up to days", () => {
    const arb = fc.tuple(fc.array(specArb, { minLength: 1, maxLength: 3 }), startArb, fc.array(opArb, { minLength: 1, maxLength: 40 }));
    fc.assert(fc.property(arb, check), { numRuns: 2_000 });
  });

  it("the base: a multiple of every limit's period, at least 2^30 ms before the first reading; 0 when the periods are too long", () => {
    const t = 1_764_236_401_237;
    const [fixed, sub, first, month] = resolveLimits([
      { algorithm: "fixed-window", limit: 1, window: 7_000 },
      { algorithm: "sliding-window", limit: 1, window: 3 * 12, buckets: 3 },
      { algorithm: "fixed-window", limit: 1, window: 7_000, align: "first-request" },
      { algorithm: "fixed-window", limit: 1, window: 30 * DAY },
    ]) as [ResolvedLimit, ResolvedLimit, ResolvedLimit, ResolvedLimit];
    for (const limits of [[fixed], [sub], [fixed, sub], [first], [fixed, sub, first]]) {
      const base = baseFor(limits, t);
      expect(t - base).toBeGreaterThanOrEqual(BEFORE_FIRST);
      expect(t - base).toBeLessThan(BEFORE_FIRST + 7_000 * 12);
      if (limits.includes(fixed)) expect(base % 7_000).toBe(0);
      if (limits.includes(sub)) expect(base % 12).toBe(0);
    }
    expect(baseFor([month], t)).toBe(0);
    expect(baseFor([fixed, resolveLimits([{ algorithm: "fixed-window", limit: 1, window: DAY - 1 }])[0] as ResolvedLimit], t)).toBe(0);
    expect(baseFor([fixed], 1_000)).toBe(0); // a clock near the epoch: its times are small already
  });
});

const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/**
 * In a child process: `runs` decisions on 64 keys of a table of `specs` with an awkward clock that
 * mostly moves forward and sometimes steps back, then, over every key's slots,
 * whether each of `a`, `b` (and the key's `exp`) is a Smi in all of them.
 */
function smis(specs: LimitSpec[], runs = 20_000): Record<string, boolean> {
  const script = `import { MemoryStore, resolveLimits } from ${JSON.stringify(LIB)};
const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(${JSON.stringify(specs)}), "smi");
let t = 1_764_236_401_237;
for (let i = 0; i < ${runs}; i++) {
  t += i % 97 === 0 ? -250 : 7;
  table.consume("k" + (i % 64), 1, t);
  if (i % 50 === 0) table.peek("k" + (i % 64), 1, t);
  if (i % 77 === 0) table.refund("k" + (i % 64), 1, t);
}
const seen = { a: true, b: true, exp: true };
for (let k = 0; k < 64; k++) {
  const e = table.young.get("k" + k) ?? table.old.get("k" + k);
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

const ALL = { a: true, b: true, exp: true };

describe("memory store: each key's state holds small integers (V8 Smis), no number boxes", () => {
  const cases: [string, LimitSpec[]][] = [
    ["fixed window", [{ algorithm: "fixed-window", limit: 50, window: 1_000 }]],
    ["fixed window from the first request", [{ algorithm: "fixed-window", limit: 50, window: 1_000, align: "first-request" }]],
    ["token bucket", [{ algorithm: "token-bucket", limit: 50, window: 1_000 }]],
    ["leaky bucket (shape)", [{ algorithm: "leaky-bucket", limit: 50, window: 1_000, mode: "shape" }]],
    ["GCRA", [{ algorithm: "gcra", limit: 50, window: 1_000, burst: 10 }]],
    ["sliding window of one 100 ms sub-window", [{ algorithm: "sliding-window", limit: 5, window: 100 }]],
    ["sliding window of four sub-windows", [{ algorithm: "sliding-window", limit: 20, window: 400, buckets: 4 }]],
    ["sliding log", [{ algorithm: "sliding-log", limit: 20, window: 1_000 }]],
    [
      "three limits",
      [
        { algorithm: "fixed-window", limit: 50, window: 1_000 },
        { algorithm: "sliding-window", limit: 500, window: 60_000, buckets: 3 },
        { algorithm: "gcra", limit: 50, window: 1_000, burst: 10 },
      ],
    ],
  ];
  it.each(cases)("%s", (_name, specs) => {
    expect(smis(specs)).toEqual(ALL);
  });
});

/**
 * In a child process: one key of each bucket table of `specs` (1 per window each) filled to
 * `fill` units at one instant, as a heavy client fills it, then one decision on a fresh key of
 * a fixed-window table of the same store; whether `a` and `b` of each of those slots are Smis.
 * The Slot class is shared by every table, so a bucket level that is no Smi boxes the fixed
 * window's count too.
 */
function filledSmis(specs: LimitSpec[], fills: number[]): Record<string, boolean> {
  const script = `import { MemoryStore, resolveLimits } from ${JSON.stringify(LIB)};
const store = new MemoryStore({ sweepIntervalMs: 0 });
const specs = ${JSON.stringify(specs)}, fills = ${JSON.stringify(fills)};
const slot = (table, key) => table.young.get(key) ?? table.old.get(key);
let t = 1_764_236_401_237;
const seen = {};
specs.forEach((spec, i) => {
  const table = store.bind(resolveLimits([spec]), "heavy" + i);
  for (let n = 0; n < fills[i]; n++) if (!table.consume("heavy", 1, t).allowed) throw new Error("denied at " + n);
  const s = slot(table, "heavy");
  seen[spec.algorithm + " " + i] = %IsSmi(s.a) && %IsSmi(s.b);
});
const fixed = store.bind(resolveLimits([{ algorithm: "fixed-window", limit: 10, window: 1000 }]), "fixed");
fixed.consume("fresh", 1, t + 1000);
const s = slot(fixed, "fresh");
seen.fixed = %IsSmi(s.a) && %IsSmi(s.b);
process.stdout.write(JSON.stringify(seen));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as Record<string, boolean>;
}

describe("memory store: a nearly full bucket of a long window keeps its level a Smi (and every other slot's)", () => {
  it("1,000 an hour, 10,000 a day, GCRA 1,000 an hour with a burst of 5,000", () => {
    const specs: LimitSpec[] = [
      { algorithm: "token-bucket", limit: 1_000, window: "1h" },
      { algorithm: "leaky-bucket", limit: 10_000, window: "1d", mode: "shape" },
      { algorithm: "gcra", limit: 1_000, window: "1h", burst: 5_000 },
    ];
    expect(filledSmis(specs, [990, 9_990, 5_000])).toEqual({ "token-bucket 0": true, "leaky-bucket 1": true, "gcra 2": true, fixed: true });
  });
});
