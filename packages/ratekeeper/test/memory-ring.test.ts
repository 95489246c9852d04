/**
 * The rings of the memory store's states are of two kinds (core/algorithms/ring.ts): a sliding
 * window's sub-window counts, up to 64 slots, are a plain JS array whose elements V8 keeps as
 * small integers (PACKED_SMI_ELEMENTS: one backing store inside the heap, no typed array's three
 * objects); a larger window's, and a sliding log's times whatever their number, a Float64Array
 * (its data off the JS heap). Asked in a child process run with `--allow-natives-syntax` on the
 * built library, as memory-time.test.ts does, after decisions that wrap and grow a log's ring,
 * refund units, and step the clock back. A limiter of one sliding window of up to 62 sub-windows
 * has no ring objects: its table keeps the counts in rows (stores/memory-rows.ts).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import type { LimitSpec } from "../src/index.js";

const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

interface Seen {
  /** Rings that are packed JS arrays of Smis only (at most 64 slots: `short` counts the others). */
  packedSmi: number;
  short: number;
  /** Rings that are Float64Arrays, those of at most 64 slots among them. */
  float64: number;
  smallFloat64: number;
  /** Rings of neither kind. */
  other: number;
}

/**
 * In a child process: on 32 keys of a table of `specs`, a slow phase (one unit every 230 ms, so
 * a log's first ring of 8 slots wraps over units outside the window), then bursts of `burst`
 * units at one instant on every fourth key, 30 on the others (the log's ring grows over units
 * that left it), refunds, a clock that steps back; then, over every key's slots, the rings of
 * each kind (see {@link Seen}).
 */
function rings(specs: LimitSpec[], burst: number): Seen {
  const script = `import { MemoryStore, resolveLimits } from ${JSON.stringify(LIB)};
const table = new MemoryStore({ sweepIntervalMs: 0 }).bind(resolveLimits(${JSON.stringify(specs)}), "ring");
let t = 1_764_236_401_237;
for (let i = 0; i < 32 * 40; i++) {
  t += i % 53 === 0 ? -150 : 7;
  table.consume("k" + (i % 32), 1, t);
  if (i % 29 === 0) table.refund("k" + (i % 32), 1, t);
}
for (let round = 0; round < 3; round++) {
  t += 1_000;
  for (let k = 0; k < 32; k++) {
    for (let c = 0; c < (k % 4 === 0 ? ${burst} : 30); c++) table.consume("k" + k, 1, t);
    if (k % 3 === 0) table.refund("k" + k, 2, t);
  }
}
const seen = { packedSmi: 0, short: 0, float64: 0, smallFloat64: 0, other: 0 };
for (let k = 0; k < 32; k++) {
  const e = table.young.get("k" + k) ?? table.old.get("k" + k);
  for (const s of e.s ?? [e]) {
    const ring = s.ring;
    if (ring === null) continue;
    if (ring instanceof Float64Array) {
      seen.float64++;
      if (ring.length <= 64) seen.smallFloat64++;
      continue;
    }
    let ok = Array.isArray(ring) && %HasSmiElements(ring) && !%HasHoleyElements(ring);
    for (let j = 0; ok && j < ring.length; j++) ok = %IsSmi(ring[j]);
    if (!ok) seen.other++;
    else {
      seen.packedSmi++;
      if (ring.length > 64) seen.short++;
    }
  }
}
process.stdout.write(JSON.stringify(seen));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as Seen;
}

describe("memory store: a sliding window's ring of up to 64 slots is a JS array of small integers", () => {
  const log = (limit: number): LimitSpec => ({ algorithm: "sliding-log", limit, window: 1_000 });
  const arrays = (n: number): Seen => ({ packedSmi: n, short: 0, float64: 0, smallFloat64: 0, other: 0 });
  const cases: [string, LimitSpec[], number, Seen][] = [
    // A limiter of one limit keeps a window of up to 62 sub-windows in its table's rows, no ring object (memory-rows.ts).
    ["sliding window of 10 sub-windows: rows", [{ algorithm: "sliding-window", limit: 40, window: 1_000, buckets: 10 }], 30, arrays(0)],
    // One sub-window whose counts do not pack (a limit above 32,767): its two counts in rows too.
    [
      "sliding window of one sub-window, limit above 32,767: rows",
      [{ algorithm: "sliding-window", limit: 1_000_000, window: 1_000 }],
      30,
      arrays(0),
    ],
    [
      "sliding window of one sub-window, limit above 32,767, with a second limit (a ring of 2)",
      [
        { algorithm: "sliding-window", limit: 1_000_000, window: 1_000 },
        { algorithm: "fixed-window", limit: 100_000, window: 1_000 },
      ],
      30,
      arrays(32),
    ],
    [
      "sliding window of 62 sub-windows (a ring of 64): rows",
      [{ algorithm: "sliding-window", limit: 400, window: 62_000, buckets: 62 }],
      30,
      arrays(0),
    ],
    [
      "sliding window of 62 sub-windows with a second limit (a ring of 64)",
      [
        { algorithm: "sliding-window", limit: 400, window: 62_000, buckets: 62 },
        { algorithm: "fixed-window", limit: 100_000, window: 1_000 },
      ],
      30,
      arrays(32),
    ],
    [
      "sliding window of 100 sub-windows (a ring of 102): a Float64Array",
      [{ algorithm: "sliding-window", limit: 400, window: 1_000, buckets: 100 }],
      30,
      { packedSmi: 0, short: 0, float64: 32, smallFloat64: 0, other: 0 },
    ],
    [
      "sliding log, small and grown past 64 slots: Float64Arrays",
      [log(1_000)],
      200,
      { packedSmi: 0, short: 0, float64: 32, smallFloat64: 24, other: 0 },
    ],
    [
      "a sliding log and a sliding window on one key",
      [log(1_000), { algorithm: "sliding-window", limit: 300, window: 3_000, buckets: 3 }],
      200,
      { packedSmi: 32, short: 0, float64: 32, smallFloat64: 24, other: 0 },
    ],
  ];
  it.each(cases)("%s", (_name, specs, burst, want) => {
    expect(rings(specs, burst)).toEqual(want);
  });
});
