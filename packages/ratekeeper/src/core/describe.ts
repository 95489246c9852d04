/**
 * Compact views of the library's objects for `console.log` / `util.inspect` and `JSON.stringify`.
 * Without them a lease printed its limiter, the limiter its store, and the store its tables and
 * timers (and `JSON.stringify(lease)` threw on the timers' circular structure).
 */

/** Node's `util.inspect.custom`, reached without importing `node:util` (the library also runs where there is none); Bun honours it too. */
const INSPECT = Symbol.for("nodejs.util.inspect.custom");

type Inspect = (value: unknown, options?: object) => string;

/**
 * Gives the instances of `Class` a compact `util.inspect` (`Name { ...summary }`) and a `toJSON`
 * that is the summary. The summary holds what a reader needs (limits, key, id, bounds), never the
 * objects behind.
 * @example describeAs(MemoryStore, "MemoryStore", (s) => ({ keys: s.size, maxKeys: s.maxKeys }))
 */
export function describeAs<T extends object>(
  Class: abstract new (...args: never[]) => T,
  name: string,
  summary: (x: T) => Record<string, unknown>,
): void {
  function inspectCustom(this: T, depth: number, options: { depth?: number | null } | undefined, inspect?: Inspect): string {
    if (depth < 0) return `[${name}]`;
    const s = summary(this);
    if (inspect === undefined) return `${name} ${JSON.stringify(s)}`;
    const d = options?.depth;
    return `${name} ${inspect(s, { ...options, depth: d === null || d === undefined ? d : d - 1 })}`;
  }
  function toJSON(this: T): Record<string, unknown> {
    return summary(this);
  }
  Object.defineProperty(Class.prototype, INSPECT, { value: inspectCustom, configurable: true, writable: true });
  Object.defineProperty(Class.prototype, "toJSON", { value: toJSON, configurable: true, writable: true });
}

/** A limit in a few words: `gcra 10 per 1000 ms`. */
export function limitWords(l: { readonly algorithm: string; readonly limit: number; readonly windowMs: number }): string {
  return `${l.algorithm} ${l.limit} per ${l.windowMs} ms`;
}
