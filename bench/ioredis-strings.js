// What loading ioredis does to an in-memory decision: ioredis 6's `class VerbatimString extends
// String` leaves String.prototype slow in V8, and the memory store hashes keys with string
// methods (packages/ratekeeper/src/string-prototype.ts). One process per case, alternated:
//   plain    ratekeeper only
//   ioredis  ioredis imported first, then ratekeeper (a RateLimiter makes the prototype fast again)
// Prints CPU ns per `consumeNow` (fixed window, 100,000 keys in a stride), medians of the rounds.
// The two should match; before 3d7e772 (run this file from that checkout) ioredis's was 2-2.5x.
// Usage: node bench/ioredis-strings.js [--rounds 5]
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

const args = process.argv.slice(2);
const ROUNDS = Number(args[args.indexOf("--rounds") + 1] ?? 5) || 5;
const CASES = ["plain", "ioredis"];
const N = 3_000_000;

if (args[0] === "--child") {
  const kind = args[1];
  if (kind !== "plain") await import("ioredis");
  const { RateLimiter, MemoryStore } = await import("../packages/ratekeeper/dist/index.js");
  const lim = new RateLimiter({ limits: [{ algorithm: "fixed-window", limit: 1e9, window: "1h" }], store: new MemoryStore() });
  const keys = Array.from({ length: 100_000 }, (_, i) => `user:${i}:abc`);
  let sink = 0;
  for (let r = 0; r < 6; r++) {
    const t = process.cpuUsage();
    for (let i = 0; i < N; i++) sink += lim.consumeNow(keys[(i * 7919) % 100_000]).remaining;
    const u = process.cpuUsage(t);
    if (r >= 2) process.stdout.write(`${((u.user + u.system) * 1000) / N}\n`);
  }
  if (sink === 0) process.stdout.write("");
  process.exit(0);
}

const self = fileURLToPath(import.meta.url);
const samples = Object.fromEntries(CASES.map((c) => [c, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const c of CASES) {
    const out = execFileSync(process.execPath, [self, "--child", c], { encoding: "utf8" });
    samples[c].push(...out.trim().split("\n").map(Number));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`consumeNow, fixed window, 100,000 keys: CPU ns per decision, ${ROUNDS} processes per case, alternated`);
for (const c of CASES)
  console.log(
    `${c.padEnd(8)} median ${median(samples[c]).toFixed(1)}  (${Math.min(...samples[c]).toFixed(1)}-${Math.max(...samples[c]).toFixed(1)})`,
  );
