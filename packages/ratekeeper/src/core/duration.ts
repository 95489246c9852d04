import { describeValue, RateLimitConfigError } from "./errors.js";

/**
 * A span of time: integer milliseconds, or a string such as `"500ms"`, `"10s"`, `"1m"`, `"1h"`, `"1d"`.
 * @example "1m"
 */
export type Duration = number | `${number}${"ms" | "s" | "m" | "h" | "d"}`;

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_RE = /^\s*(\d+)\s*(ms|s|m|h|d)\s*$/;

/**
 * Parses a {@link Duration} into positive integer milliseconds.
 * @param field the option's path, named in the error (e.g. `"limits[1].window"`)
 * @throws RateLimitConfigError when the value is not a positive whole number of milliseconds
 * @example parseDuration("1m", "window") // 60000
 */
export function parseDuration(value: unknown, field: string): number {
  let ms: number | undefined;
  if (typeof value === "number") ms = value;
  else if (typeof value === "string") {
    const m = DURATION_RE.exec(value);
    if (m) ms = Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  }
  if (ms === undefined || !Number.isSafeInteger(ms) || ms <= 0) {
    throw new RateLimitConfigError([
      {
        path: field,
        message: `must be a positive whole number of milliseconds or a string like "500ms", "10s", "1m", "1h", "1d" (got ${describeValue(value)})`,
      },
    ]);
  }
  return ms;
}

/**
 * A duration string as it should be named: the number without leading zeros, then the unit
 * (`" 01m\n"` is `"1m"`). parseDuration accepts spaces around it (any Unicode space, line
 * terminators included) and leading zeros; a limit's default name carries the window into the
 * limit headers, where such characters cannot go and a long run of zeros makes them too large.
 * Undefined when `value` is not a duration string.
 * @example durationName(" 01m ") // "1m"
 */
export function durationName(value: string): string | undefined {
  const m = DURATION_RE.exec(value);
  return m ? `${(m[1] as string).replace(/^0+(?=\d)/, "")}${m[2] as string}` : undefined;
}
