/**
 * What a `ratekeeper` subcommand is: its words, usage, flags (node:util parseArgs) and a `run`
 * that resolves the exit code; plus the flag parsers every command shares.
 */
import type { ParseArgsConfig } from "node:util";

export type Flags = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** One subcommand. */
export interface Command {
  /** The words that select it, e.g. `["config", "check"]`. */
  readonly words: readonly string[];
  /** Arguments after the words, for help, e.g. `FILE`. */
  readonly args: string;
  readonly summary: string;
  /** Flags, as node:util parseArgs takes them, with a description each for help. */
  readonly flags: Flags;
  readonly flagHelp: Readonly<Record<string, string>>;
  /** Runs it; resolves the exit code (a long-running command resolves when it stops). */
  run(values: Values, positionals: string[]): Promise<number>;
}

/** A mistake in the command line: printed with the command's name, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/**
 * Decimal digits only: `Number()` alone would take "0x10" as 16, "1e3" as 1000 and " " as 0.
 */
const DECIMAL = /^[0-9]+$/;

/** A port flag: 0-65535, or `fallback` when not given. */
export function port(text: string | undefined, name: string, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const n = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new UsageError(`${name}: must be a port number 0-65535 (got ${JSON.stringify(text)})`);
  return n;
}

/** A positive whole-number flag (at most `max`: a timer's 2^31 - 1 ms), or undefined when not given. */
export function positive(text: string | undefined, name: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (text === undefined) return undefined;
  const n = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n <= 0 || n > max)
    throw new UsageError(`${name}: must be a positive whole number in decimal digits${upTo(max)} (got ${JSON.stringify(text)})`);
  return n;
}

const upTo = (max: number) => (max < Number.MAX_SAFE_INTEGER ? `, at most ${max}` : "");

/** A whole-number flag that may be 0 (e.g. a timeout, where 0 means none), or undefined when not given. */
export function nonNegative(text: string | undefined, name: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (text === undefined) return undefined;
  const n = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0 || n > max)
    throw new UsageError(`${name}: must be a whole number >= 0 in decimal digits${upTo(max)} (got ${JSON.stringify(text)})`);
  return n;
}

/** A share from 0 to 1 in decimal (`0.8`, `1`, `.5`), or undefined when not given. */
export function ratio(text: string | undefined, name: string): number | undefined {
  if (text === undefined || text === "") return undefined;
  const n = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 0 && n <= 1)) throw new UsageError(`${name}: must be a decimal number from 0 to 1, e.g. 0.8 (got ${JSON.stringify(text)})`);
  return n;
}

/** A string flag's value (parseArgs types every value loosely). */
export const str = (v: Values[string]): string | undefined => (typeof v === "string" ? v : undefined);
