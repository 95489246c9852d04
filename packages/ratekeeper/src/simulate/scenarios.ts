import { describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import { Random } from "./random.js";
import { TrafficBuilder, type Traffic } from "./traffic.js";

/** The built-in traffic patterns; see {@link scenario}. */
export const SCENARIOS = ["steady", "bursty", "boundary", "ramp", "heavy-hitter"] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** Options of {@link scenario}. The traffic is scaled to the limit: rates are multiples of `limit / window`. */
export interface ScenarioOptions {
  /** Requests per window the limit allows: the traffic's rates are multiples of it. */
  limit: number;
  /** The window, in milliseconds. */
  windowMs: number;
  /** Seed of the pseudo-random arrivals: the same seed gives the same traffic. @default 1 */
  seed?: number | undefined;
  /** How long the traffic lasts, in ms. @default 20 windows */
  durationMs?: number | undefined;
  /** About how many requests to generate: sets the duration instead of `durationMs`. */
  requests?: number | undefined;
  /** `heavy-hitter`: how many keys, the heavy one included. @default 100 */
  keys?: number | undefined;
}

/** What each scenario is, in one sentence (the multiples are of the limit's rate, `limit / window`). */
export const SCENARIO_DESCRIPTIONS: Readonly<Record<ScenarioName, string>> = {
  steady: "one client, random (Poisson) arrivals at 0.9x the limit's rate: under the limit on average",
  bursty: "one client, bursts of 1.5x the limit within 5% of a window, about every 2.5 windows, silent between",
  boundary: "one client sends the limit's worth just before a clock-aligned window boundary and again just after it, every 3 windows",
  ramp: "one client, random arrivals whose rate grows steadily from 0 to 3x the limit's rate",
  "heavy-hitter": "many clients at 0.3x the limit's rate each, and one (hot) at 3x",
};

/** Average offered rate of each scenario, in multiples of `limit / window` (per key count for heavy-hitter). */
function averageRate(name: ScenarioName, keys: number): number {
  switch (name) {
    case "steady":
      return 0.9;
    case "bursty":
      return 1.5 / 2.5;
    case "boundary":
      return 2 / 3;
    case "ramp":
      return 1.5;
    case "heavy-hitter":
      return 3 + 0.3 * (keys - 1);
  }
}

/** The most requests a scenario may generate (a million requests take about 20 MB). */
export const MAX_SCENARIO_REQUESTS = 50_000_000;

/**
 * Generates a built-in traffic pattern, scaled to a limit, on a virtual clock that starts at
 * a clock-aligned window boundary (so `fixed-window` with `align: "clock"` starts a window there).
 * Deterministic: the same options give the same requests.
 * @throws RateLimitConfigError naming the bad option
 * @example const traffic = scenario("boundary", { limit: 100, windowMs: 60_000 });
 */
export function scenario(name: ScenarioName, options: ScenarioOptions): Traffic {
  const o = checkOptions(name, options);
  const { limit, windowMs: W, durationMs: D } = o;
  const rate = limit / W; // the limit's rate, requests per ms
  const rnd = new Random(o.seed);
  // The first clock-aligned window boundary at or after 2026-01-01T00:00:00Z.
  const t0 = Math.ceil(Date.UTC(2026, 0, 1) / W) * W;
  const b = new TrafficBuilder();
  switch (name) {
    case "steady": {
      const id = b.keyId("client");
      for (let t = rnd.gapMs(0.9 * rate); t < D; t += rnd.gapMs(0.9 * rate)) b.addId(t0 + t, id);
      break;
    }
    case "bursty": {
      const id = b.keyId("client");
      const size = Math.max(1, Math.round(1.5 * limit));
      const spanMs = 0.05 * W;
      // Burst starts: gaps of half a window plus an exponential of mean 2 windows (mean 2.5).
      for (let t = 0.5 * W * rnd.next(); t + spanMs < D; t += 0.5 * W + spanMs + rnd.gapMs(1 / (2 * W))) {
        for (let i = 0; i < size; i++) b.addId(t0 + t + (i * spanMs) / size, id);
      }
      break;
    }
    case "boundary": {
      const id = b.keyId("client");
      const spanMs = 0.05 * W;
      // `limit` requests evenly in the last 5% of a window, `limit` more in the first 5% of the next.
      for (let edge = W; edge + spanMs <= D; edge += 3 * W) {
        for (let i = 0; i < limit; i++) b.addId(t0 + edge - spanMs + (i * spanMs) / limit, id);
        for (let i = 0; i < limit; i++) b.addId(t0 + edge + (i * spanMs) / limit, id);
      }
      break;
    }
    case "ramp": {
      // Thinning (Lewis and Shedler): arrivals at the peak rate, each kept with probability t / D.
      const id = b.keyId("client");
      for (let t = rnd.gapMs(3 * rate); t < D; t += rnd.gapMs(3 * rate)) if (rnd.next() < t / D) b.addId(t0 + t, id);
      break;
    }
    case "heavy-hitter": {
      // Independent Poisson clients superpose into one Poisson stream of the summed rate; each
      // arrival belongs to the hot key with probability (its rate / the total).
      const K = o.keys;
      const total = (3 + 0.3 * (K - 1)) * rate;
      const hotShare = (3 * rate) / total;
      const hot = b.keyId("hot");
      // A client's key is registered at its first request (id + 1 here; 0: not yet): the traffic
      // lists only keys that sent something, in order of arrival, and 10 million clients with a
      // few requests cost 40 MB here, not 10 million strings and each algorithm's state for them.
      const ids = new Uint32Array(K - 1);
      for (let t = rnd.gapMs(total); t < D; t += rnd.gapMs(total)) {
        if (rnd.next() < hotShare) b.addId(t0 + t, hot);
        else {
          const user = rnd.int(K - 1);
          if (ids[user] === 0) ids[user] = b.keyId(`user-${user + 1}`) + 1;
          b.addId(t0 + t, (ids[user] as number) - 1);
        }
      }
      break;
    }
  }
  const keysNote = name === "heavy-hitter" ? ` (${o.keys} keys)` : "";
  return b.build(name, `${SCENARIO_DESCRIPTIONS[name]}${keysNote}`, { startMs: t0, endMs: t0 + D });
}

interface CheckedOptions {
  limit: number;
  windowMs: number;
  seed: number;
  durationMs: number;
  keys: number;
}

function checkOptions(name: unknown, o: ScenarioOptions): CheckedOptions {
  const issues: ConfigIssue[] = [];
  if (!(SCENARIOS as readonly unknown[]).includes(name)) {
    issues.push({ path: "scenario", message: `must be one of ${SCENARIOS.join(", ")} (got ${describeValue(name)})` });
    throw new RateLimitConfigError(issues);
  }
  const whole = (v: unknown, path: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
      issues.push({ path, message: `must be a whole number from ${min} to ${max} (got ${describeValue(v)})` });
      return min;
    }
    return v;
  };
  const limit = whole(o.limit, "limit", 1);
  const windowMs = whole(o.windowMs, "windowMs", 1);
  const seed = o.seed === undefined ? 1 : whole(o.seed, "seed", 0, 2 ** 32 - 1);
  const keys = o.keys === undefined ? 100 : whole(o.keys, "keys", 2, 10_000_000);
  let durationMs = o.durationMs === undefined ? 20 * windowMs : whole(o.durationMs, "durationMs", 1);
  if (o.requests !== undefined) {
    const requests = whole(o.requests, "requests", 1, MAX_SCENARIO_REQUESTS);
    durationMs = Math.max(1, Math.round(requests / ((averageRate(name as ScenarioName, keys) * limit) / windowMs)));
  }
  if (issues.length === 0) {
    const expected = (averageRate(name as ScenarioName, keys) * limit * durationMs) / windowMs;
    if (expected > MAX_SCENARIO_REQUESTS)
      issues.push({
        path: o.requests !== undefined ? "requests" : "durationMs",
        message: `would generate about ${Math.round(expected)} requests; at most ${MAX_SCENARIO_REQUESTS} (shorten the duration)`,
      });
  }
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  return { limit, windowMs, seed, durationMs, keys };
}
