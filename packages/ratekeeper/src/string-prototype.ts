/**
 * Keeps `String.prototype` an object with fast properties in V8, so that `s.charCodeAt(i)`,
 * `s.slice(a, b)`, `s.indexOf(x)` on a string are compiled inline by V8's optimizing compiler.
 *
 * Why: ioredis (6.0.0, resp/verbatim-string.js) defines `class VerbatimString extends String`.
 * Making an object the prototype of a class makes V8 turn it into a dictionary-mode object
 * ("normalize as prototype"), to be turned back into a fast one the first time a property is
 * looked up through it from an object; but a lookup on a string primitive never turns it back.
 * So from the moment ioredis is imported, every method call on a string anywhere in the process
 * is a generic inline-cache call instead of a few instructions: the memory store's key hash
 * (a `consumeNow` over 100,000 keys took 250-300 ns instead of 90-130 ns), the middleware's
 * header and address parsing, the decision service's body reader, node's own HTTP code
 * (docs/benchmarks/memory.md, docs/benchmarks/service.md).
 *
 * A property read through a String object, from a function with feedback (V8 allocates it after
 * a few calls), turns the prototype back into a fast object and marks it as one to keep fast,
 * so an `extends String` after that leaves it fast too. It changes no behaviour: it only reads
 * a property. {@link RateLimiter}'s constructor calls it once per process, so every use of
 * ratekeeper (stores, middleware, the service) runs with the fast prototype whichever order the
 * app imported ioredis in. test/string-prototype.test.ts checks it with V8's own
 * `%HasFastProperties`.
 * @example import "ioredis"; keepStringPrototypeFast();
 */
export function keepStringPrototypeFast(): void {
  if (done) return;
  done = true;
  const wrapper = Object("") as { charCodeAt: unknown };
  // 100 calls: V8 gives a function its feedback after 8 calls (and only then does the read
  // reach the code that makes prototypes fast); far more than that costs nothing.
  for (let i = 0; i < 100; i++) readThrough(wrapper);
}

let done = false;

function readThrough(s: { charCodeAt: unknown }): unknown {
  return s.charCodeAt;
}
