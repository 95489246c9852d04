// Each algorithm, on the same traffic: a burst of 12 requests in 2 s, a pause, then 6 more.
// Every limiter allows 5 requests per 10 s. Run with `npm run demo`, which builds the library
// and then runs `node examples/demo.js`.
//
// A manual clock replays the traffic instantly, so the timeline is the same on every run.
import { RateLimiter } from "ratekeeper";

const LIMIT = 5;
const WINDOW = "10s";

// Noon exactly, so the clock-aligned fixed windows are [0 s, 10 s), [10 s, 20 s), ...
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

// 12 requests in 2 s across the 10 s boundary (9.00 s to 10.83 s), a pause, then 6 more from 17 s.
const times = [
  ...Array.from({ length: 12 }, (_, i) => 9_000 + Math.round((i * 2000) / 12)),
  ...Array.from({ length: 6 }, (_, i) => 17_000 + i * 500),
];

const columns = [
  {
    label: "fixed",
    note: "fixed-window: resets at 10 s and 20 s: 10 admitted within 2 s across the boundary, then nothing until 20 s",
    spec: { algorithm: "fixed-window" },
  },
  {
    label: "fixed/1st",
    note: 'fixed-window, align "first-request": the window opens at the first request (9 s) and ends at 19 s',
    spec: { algorithm: "fixed-window", align: "first-request" },
  },
  {
    label: "log",
    note: "sliding-log: exact: never more than 5 in any 10 s; memory grows with the limit",
    spec: { algorithm: "sliding-log" },
  },
  {
    label: "tail",
    note: "sliding-window, buckets 1 (sliding tail): weighs the previous window as if its traffic were even; this burst was at its end, so 10 pass between 9.0 s and 18.5 s",
    spec: { algorithm: "sliding-window", buckets: 1 },
  },
  {
    label: "sw/5",
    note: "sliding-window, buckets 5, unweighted: the current 2 s sub-window and the 4 before it hold at most 5",
    spec: { algorithm: "sliding-window", buckets: 5, weighted: false },
  },
  {
    label: "token",
    note: "token-bucket (capacity 5): a burst of 5, then 1 every 2 s (leaky-bucket police is the same)",
    spec: { algorithm: "token-bucket" },
  },
  {
    label: "shape",
    note: "leaky-bucket shape: queues up to 5, each waits its turn (+delay), one leaves every 2 s",
    spec: { algorithm: "leaky-bucket", mode: "shape" },
  },
  { label: "gcra", note: "gcra, burst 0: strictly one request per 2 s", spec: { algorithm: "gcra" } },
  { label: "gcra+2", note: "gcra, burst 2: 3 at once, then one per 2 s", spec: { algorithm: "gcra", burst: 2 } },
];

let now = T0;
const limiters = columns.map((c) => new RateLimiter({ limit: LIMIT, window: WINDOW, ...c.spec, clock: () => now }));

const cell = (d) => (!d.allowed ? "--" : d.delayMs > 0 ? `ok+${(d.delayMs / 1000).toFixed(1)}s` : "ok");
const widths = columns.map((c) => Math.max(c.label.length, 8));
const row = (first, cells) => `${first.padStart(6)} | ${cells.map((s, i) => s.padEnd(widths[i])).join(" ")}`;

console.log(`${LIMIT} requests per ${WINDOW}, the same 18 requests through each algorithm ("ok" admitted, "--" rejected)\n`);
console.log(
  row(
    "t (s)",
    columns.map((c) => c.label),
  ),
);
console.log(`${"-".repeat(7)}+${"-".repeat(widths.reduce((a, w) => a + w + 1, 0))}`);
const admitted = columns.map(() => 0);
for (const [n, t] of times.entries()) {
  if (n === 12)
    console.log(
      row(
        "...",
        columns.map(() => ""),
      ),
    );
  now = T0 + t;
  const cells = [];
  for (const [i, limiter] of limiters.entries()) {
    const d = await limiter.consume("client-1");
    if (d.allowed) admitted[i]++;
    cells.push(cell(d));
  }
  console.log(row((t / 1000).toFixed(2), cells));
}
console.log(`${"-".repeat(7)}+${"-".repeat(widths.reduce((a, w) => a + w + 1, 0))}`);
console.log(
  row(
    "total",
    admitted.map((n) => `${n}/18`),
  ),
);
console.log("");
for (const c of columns) console.log(`${c.label.padEnd(10)} ${c.note}`);
