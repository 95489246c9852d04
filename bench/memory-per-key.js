// Bench section "memory-per-key": how many bytes a key takes in the MemoryStore, per algorithm,
// measured, next to the store's own estimate (`store.bytes`, the figure `maxBytes` bounds).
//
// Each case runs in its own child (`node --expose-gc`): it floods a store with N fresh keys
// built the way the middleware and the service build them (`"ip:" + addr`, 10-14 characters, or a
// service descriptor key of about 45 characters), each
// charged R times, and reports (heap used + external memory after gc, minus the same before) / N.
// Limit 1000 per hour for every algorithm, so nothing expires and the sliding log keeps R units.
//
// Usage: npm run bench -- memory-per-key        (or: node --expose-gc bench/memory-per-key.js [--keys N] [--markdown])
// Results: docs/security.md ("Memory per key").

import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RateLimiter, MemoryStore } from "ratekeeper";
import { table, machineLine } from "./lib/format.js";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};

/** [label, limiter options besides store and clock, charges per key, key shape, ms between a key's charges] */
const CASES = [
  ["fixed-window, 45-character keys", { algorithm: "fixed-window", limit: 1000, window: "1h" }, 1, "long"],
  ["fixed-window", { algorithm: "fixed-window", limit: 1000, window: "1h" }, 1],
  ["token-bucket", { algorithm: "token-bucket", limit: 1000, window: "1h" }, 1],
  ["leaky-bucket", { algorithm: "leaky-bucket", limit: 1000, window: "1h" }, 1],
  ["gcra", { algorithm: "gcra", limit: 1000, window: "1h" }, 1],
  ["sliding-window buckets=1", { algorithm: "sliding-window", limit: 1000, window: "1h", buckets: 1 }, 1],
  ["sliding-window buckets=10", { algorithm: "sliding-window", limit: 1000, window: "1h", buckets: 10 }, 1],
  ["sliding-log, 1 unit logged", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 1],
  ["sliding-log, 10 units logged", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 10],
  ["sliding-log, 100 units logged", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 100],
  ["sliding-log, 1000 units logged (full)", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 1000],
  // A long-lived key at a low rate: 2,000 units, one a minute, so 60 in any window of the hour.
  ["sliding-log, 2000 units at 1 a minute", { algorithm: "sliding-log", limit: 1000, window: "1h" }, 2000, "short", 60_000],
  [
    "two limits: token-bucket + fixed-window",
    {
      limits: [
        { algorithm: "token-bucket", limit: 10, window: "1s" },
        { algorithm: "fixed-window", limit: 1000, window: "1h" },
      ],
    },
    1,
  ],
];

if (args[0] === "--child") {
  const [, index, keys] = args;
  const [, spec, charges, keyShape, stepMs = 0] = CASES[Number(index)];
  const n = Math.max(1, Math.floor(Number(keys) / Math.max(1, charges / 10)));
  let now = 1_700_000_000_000;
  const store = new MemoryStore({ maxKeys: 100_000_000, maxBytes: 2 ** 50, sweepIntervalMs: 0 });
  const limiter = new RateLimiter({ ...spec, store, clock: () => now });
  const used = () => {
    globalThis.gc();
    globalThis.gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  limiter.consumeNow("warm-up", 1);
  const before = used();
  for (let i = 0; i < n; i++) {
    const key =
      keyShape === "long"
        ? "web|remote_address=203.0." + (i >> 8) + "." + (i & 255) + "|path=/search"
        : "ip:10.0." + (i >> 8) + "." + (i & 255);
    const start = now;
    for (let c = 0; c < charges; c++) {
      limiter.consumeNow(key, 1);
      now += stepMs;
    }
    now = start + 1; // every key's charges at the same times, one ms apart from the previous key's
  }
  const after = used();
  // The warm-up key is in both figures: count it out of the estimate.
  const estimated = store.bytes / store.size;
  process.stdout.write(JSON.stringify({ keys: n, measured: (after - before) / n, estimated }));
  process.exit(0);
}

const KEYS = Number(opt("--keys", 100_000));
const rows = [];
for (let i = 0; i < CASES.length; i++) {
  const r = spawnSync(process.execPath, ["--expose-gc", fileURLToPath(import.meta.url), "--child", String(i), String(KEYS)], {
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`case ${CASES[i][0]} failed: ${r.stderr}`);
  const j = JSON.parse(r.stdout);
  rows.push([CASES[i][0], String(j.keys), j.measured.toFixed(0), j.estimated.toFixed(0), (j.estimated / j.measured).toFixed(2)]);
}
const t = table(["case", "keys", "measured bytes/key", "estimate (store.bytes)", "estimate / measured"], rows);
console.log(`\nMemoryStore: bytes per key (heap + external after gc, per fresh key)\n${await machineLine()}\n`);
console.log(args.includes("--markdown") ? t.markdown : t.text);
