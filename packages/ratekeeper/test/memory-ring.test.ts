/**
 * The rings of the memory store's states (a sliding window's sub-window counts, a sliding log's
 * times) are plain JS arrays whose elements V8 keeps as small integers (PACKED_SMI_ELEMENTS: one
 * backing store inside the heap, no typed array's three objects; core/algorithms/ring.ts): asked
 * in a child process run with `--allow-natives-syntax` on the built library, as
 * memory-time.test.ts does, after decisions that wrap and grow a log's ring, refund units,
 * and step the clock back.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import type { LimitSpec } from "../src/index.js";

const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/**
 * In a child process: on 32 keys of a table of `specs`, a slow phase (one unit every 230 ms, so
 * a log's first ring of 8 slots wraps over units outside the window), then bursts of 30 units at
 * one instant (the log's ring grows over units that left it), refunds, a clock that steps back;
 * then, over every key's slots: how many rings there are, whether each is an array, packed, with
 * small-integer elements, and each element a Smi.
 */
function rings(specs: LimitSpec[]): Record<string, number | boolean> {
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
    for (let c = 0; c < 30; c++) table.consume("k" + k, 1, t);
    if (k % 3 === 0) table.refund("k" + k, 2, t);
  }
}
const seen = { rings: 0, array: true, packedSmi: true, smis: true };
for (let k = 0; k < 32; k++) {
  const e = table.young.get("k" + k) ?? table.old.get("k" + k);
  for (const s of e.s ?? [e]) {
    const ring = s.ring;
    if (ring === null) continue;
    seen.rings++;
    seen.array = seen.array && Array.isArray(ring);
    if (!Array.isArray(ring)) { seen.packedSmi = seen.smis = false; continue; }
    seen.packedSmi = seen.packedSmi && %HasSmiElements(ring) && !%HasHoleyElements(ring);
    for (let j = 0; j < ring.length; j++) seen.smis = seen.smis && %IsSmi(ring[j]);
  }
}
process.stdout.write(JSON.stringify(seen));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as Record<string, number | boolean>;
}

describe("memory store: rings are JS arrays of small integers (V8 PACKED_SMI_ELEMENTS)", () => {
  const cases: [string, LimitSpec[], number][] = [
    ["sliding window of 10 sub-windows", [{ algorithm: "sliding-window", limit: 40, window: 1_000, buckets: 10 }], 32],
    [
      "sliding window of one sub-window, limit above 32,767 (a ring of 2)",
      [{ algorithm: "sliding-window", limit: 1_000_000, window: 1_000 }],
      32,
    ],
    ["sliding log (its ring wraps, grows, and takes refunds)", [{ algorithm: "sliding-log", limit: 100, window: 1_000 }], 32],
    [
      "a sliding log and a sliding window on one key",
      [
        { algorithm: "sliding-log", limit: 100, window: 1_000 },
        { algorithm: "sliding-window", limit: 300, window: 3_000, buckets: 3 },
      ],
      64,
    ],
  ];
  it.each(cases)("%s", (_name, specs, count) => {
    expect(rings(specs)).toEqual({ rings: count, array: true, packedSmi: true, smis: true });
  });
});
