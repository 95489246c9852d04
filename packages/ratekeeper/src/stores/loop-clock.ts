/**
 * The memory store's clock when none is injected: `Date.now()`, read at most once per turn of the
 * event loop and at most once per {@link USES_PER_READING} decisions.
 *
 * Why: on common VMs a `Date.now()` costs 35-50 ns, as much as the rest of an in-memory decision
 * together (docs/benchmarks/memory.md). Decisions made in the same turn of the event loop share
 * the reading taken by the first of them, the same notion of "now" as the loop's own clock (libuv
 * reads the time once per turn, and timers fire against that reading; Cloudflare Workers freeze
 * `Date.now()` between I/O events for the same reason). A reading is taken during the current turn,
 * so a decision's time is at most one turn old, never later than the true time.
 *
 * How: the first read in a turn schedules a `setImmediate` that discards the reading after the
 * turn's I/O callbacks (a pending immediate also keeps the loop's poll from blocking, so a reading
 * never outlives an idle wait). Code that makes many decisions without returning to the loop (a
 * long chain of awaited promises) re-reads the clock every {@link USES_PER_READING} decisions.
 *
 * Exactness is unchanged: the algorithms are exact for the times they are given, and the times
 * given never run backwards (unless the system clock itself steps back, which they handle).
 *
 * Test doubles: when `Date.now` has been replaced (vi.useFakeTimers, sinon, a manual stub), every
 * call reads it, so a mocked clock is seen at once. When `Date.now` was not the runtime's own
 * function when this module loaded, or `setImmediate` was missing or a fake, nothing is cached.
 */

/** Decisions that may share one reading within a turn. */
export const USES_PER_READING = 16;

const nativeNow: () => number = Date.now;
const nativeImmediate: ((cb: () => void) => unknown) | undefined =
  typeof setImmediate === "function" && !isFake(setImmediate) ? setImmediate : undefined;
/** Whether readings may be shared at all (the runtime's own clock and scheduler, captured now). */
const sharing = isNative(nativeNow) && nativeImmediate !== undefined;

let reading = 0;
/** How many more calls may return `reading`; 0 forces a fresh read. */
let uses = 0;
/** Whether an immediate that ends the current reading is scheduled. */
let armed = false;

/** A fake from @sinonjs/fake-timers (vitest, jest) or a jest mock, installed before this module loaded. */
function isFake(fn: object): boolean {
  return "clock" in fn || "_isMockFunction" in fn;
}

function isNative(fn: unknown): boolean {
  return typeof fn === "function" && /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(fn));
}

function expire(): void {
  armed = false;
  uses = 0;
}

/** Takes a fresh reading and arms its expiry (kept out of `loopNowMs` so that stays tiny and inlined). */
function readClock(): number {
  const t = Date.now();
  if (!sharing || Date.now !== nativeNow) return t;
  reading = t;
  uses = USES_PER_READING - 1;
  if (!armed) {
    armed = true;
    nativeImmediate(expire);
  }
  return t;
}

/** Milliseconds since the epoch: `Date.now()`, shared within a turn of the event loop (see above). */
export function loopNowMs(): number {
  if (uses > 0 && Date.now === nativeNow) {
    uses--;
    return reading;
  }
  return readClock();
}
