/**
 * Keeps `String.prototype` an object with fast properties in V8, so that `s.charCodeAt(i)`,
 * `s.slice(a, b)`, `s.indexOf(x)` on a string are compiled inline by V8's optimizing compiler.
 *
 * Why: ioredis (6.0.0, resp/verbatim-string.js) defines `class VerbatimString extends String`.
 * Making an object the prototype of a class makes V8 turn it into a dictionary-mode object
 * ("normalize as prototype"), to be turned back into a fast one the first time a property is
 * looked up through it from an object; but a lookup on a string primitive never turns it back.
 * So from the moment ioredis was imported, every method call on a string in the process (the
 * body reader of `POST /v1/check`, the memory store's key hash, node's own HTTP code) was a
 * generic inline-cache call instead of a few instructions: 0.6 us of the 20 us of server CPU of
 * a `POST /v1/check` in a perf profile (docs/benchmarks/service.md).
 *
 * A property read through a String object, from a function with feedback (V8 allocates it after
 * a few calls), turns the prototype back into a fast object and marks it as one to keep fast,
 * so a later `extends String` leaves it fast too. test/string-prototype.test.ts checks it with
 * V8's own `%HasFastProperties` on the modules `ratekeeper serve` loads.
 * @example import "ioredis"; keepStringPrototypeFast();
 */
export function keepStringPrototypeFast(): void {
  const wrapper = Object("") as { charCodeAt: unknown };
  // 100 calls: V8 gives a function its feedback after 8 calls (and only then does the read
  // reach the code that makes prototypes fast); far more than that costs nothing at startup.
  for (let i = 0; i < 100; i++) readThrough(wrapper);
}

function readThrough(s: { charCodeAt: unknown }): unknown {
  return s.charCodeAt;
}
