import type { Decision } from "../core/decision.js";
import type { ResolvedLimit } from "../core/options.js";

/**
 * Which rate-limit response headers to send.
 * - `"ietf"`: the current IETF draft (draft-ietf-httpapi-ratelimit-headers-10/11): one named
 *   policy per limit, as Structured Field lists (RFC 9651):
 *   `RateLimit-Policy: "100-per-1m";q=100;w=60` and `RateLimit: "100-per-1m";r=42;t=18`.
 * - `"draft-7"`: `RateLimit: limit=100, remaining=42, reset=18` and `RateLimit-Policy: 100;w=60`.
 * - `"draft-6"`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (delta seconds) and `RateLimit-Policy: 100;w=60`.
 * - `"x-ratelimit"`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (the
 *   common de facto style; Reset in Unix epoch seconds as GitHub and Twitter send it).
 */
export type HeaderStyle = "ietf" | "draft-7" | "draft-6" | "x-ratelimit";

/** The header styles, for validation. */
export const HEADER_STYLES: readonly HeaderStyle[] = ["ietf", "draft-7", "draft-6", "x-ratelimit"];

/**
 * The name to hand to node's `setHeader` / `writeHead` for a header name of {@link HeaderWriter}
 * (and `Retry-After`): the same name in lower case, as a constant. HTTP field names are
 * case-insensitive (RFC 9110 section 5.1; HTTP/2 and HTTP/3 send them in lower case, and
 * Fastify already writes them so); node lower-cases every mixed-case name it is given into a new
 * string per call, which then becomes a dictionary key: about 100 ns of the ~600 ns node spends
 * on the two IETF headers (docs/benchmarks/overhead.md). Other names are returned as given.
 * @example wireName("RateLimit-Policy") // "ratelimit-policy"
 */
export function wireName(name: string): string {
  switch (name) {
    case "RateLimit-Policy":
      return "ratelimit-policy";
    case "RateLimit":
      return "ratelimit";
    case "Retry-After":
      return "retry-after";
    case "RateLimit-Limit":
      return "ratelimit-limit";
    case "RateLimit-Remaining":
      return "ratelimit-remaining";
    case "RateLimit-Reset":
      return "ratelimit-reset";
    case "X-RateLimit-Limit":
      return "x-ratelimit-limit";
    case "X-RateLimit-Remaining":
      return "x-ratelimit-remaining";
    case "X-RateLimit-Reset":
      return "x-ratelimit-reset";
    case "Content-Type":
      return "content-type";
    default:
      return name;
  }
}

/**
 * Whole seconds, rounded up, for a millisecond span: a client that waits this long is never early.
 * @example toSeconds(1001) // 2
 */
export function toSeconds(ms: number): number {
  return ms <= 0 ? 0 : Math.ceil(ms / 1000);
}

/**
 * Seconds until the limit has room again, for the `t` / `reset` fields: for a limit that denied,
 * when the same request would pass (equal to `Retry-After`, so the headers agree); for one that
 * admitted, when the key is back to its full allowance.
 */
function resetSeconds(allowed: boolean, retryAfterMs: number, resetAfterMs: number): number {
  return toSeconds(allowed ? resetAfterMs : retryAfterMs);
}

/** Where {@link flat} leaves its probe's answer, so that the compiler keeps the probe. */
let _flatProbe = 0;

/**
 * The same string, made flat (one buffer) now. A value built by concatenation (`RateLimit`'s
 * `"<policy>";r=<n>;t=<n>`) is a V8 rope; node validates every header value with a RegExp, and a
 * RegExp run on a rope first leaves the compiled code to flatten it in the runtime: about 110 ns
 * per value, against about 55 ns for this probe's flattening plus the check of a flat string
 * (node's `setHeader`, docs/benchmarks/overhead.md). `indexOf` flattens its receiver in place.
 * The value itself is unchanged.
 */
function flat(s: string): string {
  _flatProbe = s.indexOf("\n");
  return s;
}

/**
 * Builds the rate-limit headers of one or several styles for a set of limits. The parts that
 * never change (policy descriptions) are rendered once.
 * @example
 * const w = new HeaderWriter(limiter.limits, ["ietf"]);
 * const out: [string, string][] = [];
 * w.write(await limiter.consume("k"), Date.now(), out); // [["RateLimit-Policy", ...], ["RateLimit", ...]]
 */
export class HeaderWriter {
  private readonly styles: readonly HeaderStyle[];
  private readonly ietfPolicy: [string, string];
  private readonly names: readonly string[];
  private readonly legacyPolicy: string;
  /** Whether {@link HeaderWriter.write} reads `nowMs` (only `X-RateLimit-Reset`, an epoch time, does). */
  readonly needsClock: boolean;

  constructor(limits: readonly ResolvedLimit[], styles: readonly HeaderStyle[]) {
    this.styles = styles;
    this.needsClock = styles.includes("x-ratelimit");
    // Policy names are restricted by resolveLimit to [A-Za-z0-9_.:-], so they need no escaping in an sf-string.
    this.names = limits.map((l) => `"${l.name}"`);
    // The policy header never changes: one shared pair (callers only read the pairs they are given).
    this.ietfPolicy = Object.freeze([
      "RateLimit-Policy",
      flat(limits.map((l, i) => `${this.names[i] as string};q=${l.limit};w=${toSeconds(l.windowMs)}`).join(", ")),
    ]) as [string, string];
    this.legacyPolicy = flat(limits.map((l) => `${l.limit};w=${toSeconds(l.windowMs)}`).join(", "));
  }

  /**
   * Appends `[name, value]` pairs for `d` to `out`.
   * @param nowMs the time, for the epoch-based `X-RateLimit-Reset`
   */
  write(d: Decision, nowMs: number, out: [string, string][]): void {
    for (const style of this.styles) {
      switch (style) {
        case "ietf": {
          out.push(this.ietfPolicy);
          let value: string;
          if (d.limits === undefined) {
            value = `${this.names[0] as string};r=${d.remaining};t=${resetSeconds(d.allowed, d.retryAfterMs, d.resetAfterMs)}`;
          } else {
            // Each limit's `remaining` is what it has now: a denied decision charged nothing, and the
            // core reports so (core/evaluate.ts combine()).
            value = d.limits
              .map((o, i) => `${this.names[i] as string};r=${o.remaining};t=${resetSeconds(o.allowed, o.retryAfterMs, o.resetAfterMs)}`)
              .join(", ");
          }
          out.push(["RateLimit", flat(value)]);
          break;
        }
        case "draft-7":
          out.push(["RateLimit-Policy", this.legacyPolicy]);
          out.push(["RateLimit", flat(`limit=${d.limit}, remaining=${d.remaining}, reset=${this.decisiveReset(d)}`)]);
          break;
        case "draft-6":
          out.push(["RateLimit-Policy", this.legacyPolicy]);
          out.push(["RateLimit-Limit", String(d.limit)]);
          out.push(["RateLimit-Remaining", String(d.remaining)]);
          out.push(["RateLimit-Reset", String(this.decisiveReset(d))]);
          break;
        case "x-ratelimit":
          out.push(["X-RateLimit-Limit", String(d.limit)]);
          out.push(["X-RateLimit-Remaining", String(d.remaining)]);
          out.push(["X-RateLimit-Reset", String(Math.ceil(nowMs / 1000) + this.decisiveReset(d))]);
          break;
        default: {
          const never: never = style;
          throw new Error(`unknown header style ${String(never)}`);
        }
      }
    }
  }

  /** The reset of the limit that decided (the older drafts report one limit only). */
  private decisiveReset(d: Decision): number {
    if (d.limits === undefined) return resetSeconds(d.allowed, d.retryAfterMs, d.resetAfterMs);
    const o = d.limits[d.policy];
    return o === undefined
      ? toSeconds(d.allowed ? d.resetAfterMs : d.retryAfterMs)
      : resetSeconds(o.allowed, o.retryAfterMs, o.resetAfterMs);
  }
}
