/**
 * The algorithm simulator: replay traffic (built-in scenarios, or your own access log or CSV)
 * through every algorithm with the same limit and window, on a virtual clock, and see what each
 * admits, where it over-admits, how truthful its `retryAfterMs` is, and its state over time.
 * Pure: no I/O, no timers; `ratekeeper simulate` (in `@ratekeeper/server`) draws the charts.
 * @example
 * import { simulate, scenario, formatTable } from "ratekeeper/simulate";
 * const traffic = scenario("boundary", { limit: 100, windowMs: 60_000 });
 * console.log(formatTable(simulate({ limit: 100, window: "1m", traffic })));
 */
export { simulate, type SimulateOptions, type SimulationResult, type AlgorithmResult, type AlgorithmSeries } from "./run.js";
export { scenario, SCENARIOS, SCENARIO_DESCRIPTIONS, MAX_SCENARIO_REQUESTS, type ScenarioName, type ScenarioOptions } from "./scenarios.js";
export { parseTraffic, type ParseTrafficOptions } from "./parse.js";
export { TrafficBuilder, type Traffic } from "./traffic.js";
export { DEFAULT_ALGORITHMS, STATE_LABELS, algorithmLabel, type AlgorithmChoice } from "./algorithms.js";
export type { RetrySummary, RetrySample } from "./retry.js";
export { formatTable, formatMs } from "./table.js";
export { worstCase, formatWorstCases, WORST_CASE_ALGORITHMS, type WorstCase, type WorstCaseOptions } from "./worst-case.js";
