// Measures each algorithm's worst over-admission in a rolling window (the most one key can get
// admitted in any `window` ms by timing its requests on purpose) and prints the Markdown tables
// of docs/algorithms.md. Run: npm run build && node scripts/worst-case.js [limit/window ...]
// e.g. node scripts/worst-case.js 5/10s 100/1m (the default). See ratekeeper/simulate's worstCase().
import { formatWorstCases, worstCase, WORST_CASE_ALGORITHMS } from "ratekeeper/simulate";

const configs = process.argv.length > 2 ? process.argv.slice(2) : ["5/10s", "100/1m"];
for (const c of configs) {
  const [limit, window] = c.split("/");
  const results = WORST_CASE_ALGORITHMS.map((algorithm) => worstCase({ limit: Number(limit), window, algorithm }));
  console.log(`${formatWorstCases(results)}\n`);
}
