import { gcd } from "./arith.js";
import { durationName, parseDuration, type Duration } from "./duration.js";
import { describeValue, RateLimitConfigError, type ConfigIssue } from "./errors.js";
import { isPlainObject } from "./plain-object.js";

/** The algorithms ratekeeper implements; see docs/algorithms.md for their guarantees. */
export const ALGORITHMS = ["fixed-window", "sliding-log", "sliding-window", "token-bucket", "leaky-bucket", "gcra"] as const;
export type AlgorithmName = (typeof ALGORITHMS)[number];

interface LimitBase {
  /** Cost units admitted per `window`. Must be a positive integer. */
  limit: number;
  /** The window: integer milliseconds or `"500ms"`, `"10s"`, `"1m"`, `"1h"`, `"1d"`. */
  window: Duration;
  /** Name of this policy in `RateLimit-Policy` headers and metrics. @default "<limit>-per-<window>" */
  name?: string;
}
/** Fixed window counters: one counter per window, reset when the window ends. */
export interface FixedWindowSpec extends LimitBase {
  algorithm: "fixed-window";
  /** `"clock"`: windows start at multiples of `window`; `"first-request"`: at the key's first request. @default "clock" */
  align?: "clock" | "first-request";
}
/** Sliding log: exact; rejected requests are not logged. */
export interface SlidingLogSpec extends LimitBase {
  algorithm: "sliding-log";
}
/** Sliding window counters (Figma) and the weighted sliding tail (ClassDojo, Cloudflare). */
export interface SlidingWindowSpec extends LimitBase {
  algorithm: "sliding-window";
  /** Sub-windows per window; `window` must divide evenly. `1` is the sliding tail. @default 1 */
  buckets?: number;
  /** Count the oldest, partly expired sub-window in proportion to its part still inside the window (rounded down). @default true */
  weighted?: boolean;
}
/** Token bucket: refills `limit` tokens per `window`, lazily. */
export interface TokenBucketSpec extends LimitBase {
  algorithm: "token-bucket";
  /** The most tokens held. @default limit */
  capacity?: number;
}
/** Leaky bucket as a meter (`police`) or as a queue (`shape`), leaking `limit` per `window`. */
export interface LeakyBucketSpec extends LimitBase {
  algorithm: "leaky-bucket";
  /** The bucket's size in cost units. @default limit */
  capacity?: number;
  /** `"police"` rejects when full; `"shape"` admits with `delayMs`, the wait until its turn. @default "police" */
  mode?: "police" | "shape";
}
/** Generic cell rate algorithm, as in redis-cell: one request per `window / limit`, plus `burst`. */
export interface GcraSpec extends LimitBase {
  algorithm: "gcra";
  /** Requests allowed on top of the one per emission interval. @default 0 */
  burst?: number;
}
/** One limit, as plain data: it can come from YAML, travel over gRPC, and go into Lua as ARGV. */
export type LimitSpec = FixedWindowSpec | SlidingLogSpec | SlidingWindowSpec | TokenBucketSpec | LeakyBucketSpec | GcraSpec;

/**
 * A limit with every option resolved to integers: one flat shape for every algorithm, so the
 * memory store, the Lua scripts and the reference models all read the same fields.
 */
export interface ResolvedLimit {
  readonly algorithm: AlgorithmName;
  /** Index of the algorithm in {@link ALGORITHMS}; what the Lua scripts receive. */
  readonly algorithmId: number;
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  /**
   * The most cost units one key can hold at once: `limit` for the windows and the log,
   * `capacity` for token and leaky buckets, `burst + 1` for GCRA. Also the largest admissible cost.
   */
  readonly capacity: number;
  /** sliding-window: sub-windows per window (1 elsewhere). */
  readonly buckets: number;
  /** sliding-window: weight the partly expired sub-window. */
  readonly weighted: boolean;
  /** fixed-window: windows start at the key's first request instead of the clock. */
  readonly alignFirst: boolean;
  /** leaky-bucket: report `delayMs` (the queue) instead of only metering. */
  readonly shape: boolean;
  /** gcra: the burst. */
  readonly burst: number;
  /**
   * Buckets (token, leaky, GCRA): the level one cost unit adds, `windowMs / g`, and the level
   * drained per ms, `limit / g`, with `g = gcd(windowMs, limit)` (algorithms/bucket.ts). Every
   * decision of a bucket is a ratio of its level and these two, so dividing both by `g` decides
   * the same with a level `g` times smaller (1,000 an hour: 3,600 a unit, 1 a ms). Derived from
   * `limit` and `windowMs`; not sent to the Redis scripts, which keep the level in `cost x windowMs`.
   */
  readonly unitLevel: number;
  readonly drainPerMs: number;
}

const KNOWN_OPTIONS: Readonly<Record<AlgorithmName, readonly string[]>> = {
  "fixed-window": ["align"],
  "sliding-log": [],
  "sliding-window": ["buckets", "weighted"],
  "token-bucket": ["capacity"],
  "leaky-bucket": ["capacity", "mode"],
  gcra: ["burst"],
};
const COMMON = ["algorithm", "limit", "window", "name"];
/** Every option of some algorithm: what a spec whose algorithm is unknown or missing may still hold. */
const ANY_OPTION = [...new Set([...COMMON, ...Object.values(KNOWN_OPTIONS).flat()])];

/** The largest value the integer arithmetic stays exact for (also in Lua, whose numbers are doubles). */
const MAX_EXACT = Number.MAX_SAFE_INTEGER;

/**
 * Checks one limit spec and resolves its defaults. Collects every problem instead of stopping at the first.
 * @param path where the spec sits, for error messages (e.g. `limits[1]`)
 * @throws RateLimitConfigError listing every problem with its path
 */
export function resolveLimit(spec: unknown, path = ""): ResolvedLimit {
  const issues: ConfigIssue[] = [];
  const resolved = collectLimit(spec, path, issues);
  if (issues.length > 0 || resolved === undefined) throw new RateLimitConfigError(issues);
  return resolved;
}

/** Like {@link resolveLimit}, for several limits on one key. */
export function resolveLimits(specs: unknown, path = "limits"): ResolvedLimit[] {
  const issues: ConfigIssue[] = [];
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new RateLimitConfigError([{ path, message: `must be a non-empty array of limits (got ${describeValue(specs)})` }]);
  }
  const out: ResolvedLimit[] = [];
  specs.forEach((s, i) => {
    const r = collectLimit(s, `${path}[${i}]`, issues);
    if (r) out.push(r);
  });
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  return out;
}

function collectLimit(spec: unknown, path: string, issues: ConfigIssue[]): ResolvedLimit | undefined {
  const at = (field: string) => (path ? `${path}.${field}` : field);
  if (!isPlainObject(spec)) {
    issues.push({ path: path || "options", message: `must be an object (got ${describeValue(spec)})` });
    return undefined;
  }
  const o = spec as Record<string, unknown>;
  const before = issues.length;
  const alg = readAlgorithm(o.algorithm, at("algorithm"), issues);
  // Without a known algorithm the common fields and misspelt options are still named, so that
  // `{ algo: "gcra", ... }` is told about `algo`, and every problem is listed at once.
  const known = alg === undefined ? ANY_OPTION : [...COMMON, ...KNOWN_OPTIONS[alg]];
  for (const k of Object.keys(o)) {
    if (o[k] !== undefined && !known.includes(k)) {
      const what = alg === undefined ? "unknown option" : `unknown option for "${alg}"`;
      issues.push({ path: at(k), message: `${what} (known: ${known.join(", ")})` });
    }
  }
  const limit = positiveInt(o.limit, at("limit"), issues);
  let windowMs = 0;
  try {
    windowMs = parseDuration(o.window, at("window"));
  } catch (e) {
    issues.push(...(e as RateLimitConfigError).issues);
  }
  if (alg === undefined) return undefined;
  const reading: SpecReading = { o, at, issues, limit, windowMs };
  const fields: AlgorithmFields = { ...DEFAULT_FIELDS, capacity: limit, ...ALGORITHM_FIELDS[alg](reading) };
  // Buckets keep their level in units of (cost x windowMs), leaking `limit` per ms: keep it exact.
  if (issues.length === before && fields.capacity * windowMs > MAX_EXACT) {
    issues.push({
      path: at(alg === "gcra" ? "burst" : "capacity"),
      message: `times window (${windowMs} ms) must stay below 2^53 for exact arithmetic`,
    });
  }
  const name = readName(reading);
  if (issues.length > before) return undefined;
  const { unitLevel, drainPerMs } = bucketRate(windowMs, limit);
  return { algorithm: alg, algorithmId: ALGORITHMS.indexOf(alg), name, limit, windowMs, ...fields, unitLevel, drainPerMs };
}

/**
 * A bucket's {@link ResolvedLimit.unitLevel} and {@link ResolvedLimit.drainPerMs} for `limit` per
 * `windowMs`: whoever makes a limit of another `limit` (the degraded policy's shares) derives them
 * here again, or its bucket refills at the old rate.
 */
export function bucketRate(windowMs: number, limit: number): Pick<ResolvedLimit, "unitLevel" | "drainPerMs"> {
  const g = gcd(windowMs, limit);
  return { unitLevel: windowMs / g, drainPerMs: limit / g };
}

/** One spec being read: its fields, where it sits, the problems found so far, and its common fields. */
interface SpecReading {
  readonly o: Readonly<Record<string, unknown>>;
  /** The path of one of its fields, for error messages. */
  readonly at: (field: string) => string;
  readonly issues: ConfigIssue[];
  /** `limit`, 0 when invalid (its problem is already listed). */
  readonly limit: number;
  /** `window` in ms, 0 when invalid (its problem is already listed). */
  readonly windowMs: number;
}

/** The fields of a {@link ResolvedLimit} that only some algorithms set. */
type AlgorithmFields = Pick<ResolvedLimit, "capacity" | "buckets" | "weighted" | "alignFirst" | "shape" | "burst">;
/** What an algorithm that does not use a field gets (`capacity` defaults to `limit`). */
const DEFAULT_FIELDS: Omit<AlgorithmFields, "capacity"> = { buckets: 1, weighted: true, alignFirst: false, shape: false, burst: 0 };

/** Per algorithm: checks its own options and resolves them; the fields it leaves out keep their defaults. */
const ALGORITHM_FIELDS: Readonly<Record<AlgorithmName, (r: SpecReading) => Partial<AlgorithmFields>>> = {
  "fixed-window": ({ o, at, issues }) => {
    if (o.align !== undefined && o.align !== "clock" && o.align !== "first-request") {
      issues.push({ path: at("align"), message: `must be "clock" or "first-request" (got ${describeValue(o.align)})` });
    }
    return { alignFirst: o.align === "first-request" };
  },
  "sliding-log": ({ at, issues, limit }) => {
    if (limit > 1_000_000)
      issues.push({
        path: at("limit"),
        message: `must be at most 1000000 for sliding-log, which stores one timestamp per unit (got ${limit})`,
      });
    return {};
  },
  "sliding-window": ({ o, at, issues, windowMs }) => {
    const buckets = o.buckets === undefined ? 1 : positiveInt(o.buckets, at("buckets"), issues);
    if (buckets > 1000) issues.push({ path: at("buckets"), message: `must be at most 1000 (got ${buckets})` });
    if (o.weighted !== undefined && typeof o.weighted !== "boolean") {
      issues.push({ path: at("weighted"), message: `must be true or false (got ${describeValue(o.weighted)})` });
    }
    if (windowMs > 0 && buckets > 0 && windowMs % buckets !== 0) {
      issues.push({ path: at("buckets"), message: `must divide window (${windowMs} ms) into whole milliseconds (got ${buckets})` });
    }
    return { buckets, weighted: o.weighted !== false };
  },
  "token-bucket": readCapacity,
  "leaky-bucket": (r) => {
    const { o, at, issues } = r;
    const fields = readCapacity(r);
    if (o.mode !== undefined && o.mode !== "police" && o.mode !== "shape") {
      issues.push({ path: at("mode"), message: `must be "police" or "shape" (got ${describeValue(o.mode)})` });
    }
    return { ...fields, shape: o.mode === "shape" };
  },
  gcra: ({ o, at, issues }) => {
    let burst = 0;
    if (o.burst !== undefined) {
      if (typeof o.burst !== "number" || !Number.isSafeInteger(o.burst) || o.burst < 0) {
        issues.push({ path: at("burst"), message: `must be a whole number >= 0 (got ${describeValue(o.burst)})` });
      } else burst = o.burst;
    }
    return { burst, capacity: burst + 1 };
  },
};

/** The buckets' `capacity`, when given. */
function readCapacity({ o, at, issues }: SpecReading): Partial<AlgorithmFields> {
  return o.capacity === undefined ? {} : { capacity: positiveInt(o.capacity, at("capacity"), issues) };
}

function readAlgorithm(algorithm: unknown, path: string, issues: ConfigIssue[]): AlgorithmName | undefined {
  if (typeof algorithm === "string" && (ALGORITHMS as readonly string[]).includes(algorithm)) return algorithm as AlgorithmName;
  issues.push({ path, message: `must be one of ${ALGORITHMS.map((a) => `"${a}"`).join(", ")} (got ${describeValue(algorithm)})` });
  return undefined;
}

/**
 * `name`, or the default `<limit>-per-<window as written>`, the window's spelling made canonical
 * (durationName: no spaces, no leading zeros), since the name goes into every answer's headers.
 */
function readName({ o, at, issues, limit, windowMs }: SpecReading): string {
  if (o.name === undefined) {
    const written = typeof o.window === "string" ? durationName(o.window) : undefined;
    return `${limit}-per-${written ?? `${windowMs}ms`}`;
  }
  if (typeof o.name !== "string" || !/^[A-Za-z0-9_.:-]{1,64}$/.test(o.name)) {
    issues.push({
      path: at("name"),
      message: `must be 1-64 characters of letters, digits, "_", ".", ":" or "-" (got ${describeValue(o.name)})`,
    });
    return "";
  }
  return o.name;
}

function positiveInt(v: unknown, path: string, issues: ConfigIssue[]): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0) {
    issues.push({ path, message: `must be a positive whole number (got ${describeValue(v)})` });
    return 0;
  }
  return v;
}
