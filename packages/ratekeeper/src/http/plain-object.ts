/**
 * The options-object check (core/plain-object.ts) for the adapters, which import the HTTP layer
 * only: a Map, Set, Date or class instance given as options reads as `{}` and is refused.
 */
export { describeNonPlain, isPlainObject } from "../core/plain-object.js";
