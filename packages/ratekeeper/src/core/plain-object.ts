/**
 * Options objects: an object literal is one; a Map, Set, Date, array or class instance is not.
 * Their entries are not own properties, so reading one as options would see `{}` and silently
 * apply every default (`cost: new Map([["POST /login", 10]])` would price every route at 1).
 * Every place that takes an options object (or a table of them) checks it with {@link isPlainObject}.
 */

/**
 * An object literal, or one made with no prototype (as some parsers make them). Its prototype is
 * an `Object.prototype`, this realm's or another's (an object literal from a `vm` context, as
 * some sandboxes and test runners make them): the prototype that has none itself.
 */
export function isPlainObject(value: unknown): value is object {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || proto === Object.prototype || Object.getPrototypeOf(proto) === null;
}

/**
 * An object that is not a plain one, by its constructor's name, for an error message (`a Map`,
 * `a Date`): JSON would show a Map as `{}`, which reads as if the options had been given empty.
 * Undefined for anything else (plain objects, arrays, primitives: JSON describes those well).
 */
export function describeNonPlain(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value) || isPlainObject(value)) return undefined;
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === "string" && name !== "" ? `a ${name}` : "an object that is not a plain one";
}
