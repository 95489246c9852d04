/**
 * Error ids: the id a 500 or 503 answer gives, which the service's log line of the failure names
 * (`errorId`), so that an operator handed the id by a client finds the error. One id is shared by
 * every failure of the same kind (the same store failing the same way, the same unexpected error)
 * for {@link REPEAT_WINDOW_MS} from its first use: the log writes the first failure of an id in
 * full and counts the others (log-repeats.ts), so an outage answered with errors is a few lines,
 * not one per request, and every id answered is still in the log.
 */
import { randomBytes } from "node:crypto";

/** How long an id is shared by failures of one kind, and how often their count is logged. */
export const REPEAT_WINDOW_MS = 10_000;

/** Kinds remembered at most: past that (kinds of failure by the thousand), each gets an id of its own. */
const MAX_KINDS = 1000;

const ids = new Map<string, { id: string; untilMs: number }>();

/**
 * The id of a failure of kind `kind` (a text naming it without any per-request detail): the one
 * given to that kind within the last {@link REPEAT_WINDOW_MS}, else a new random one. Counted on
 * the monotonic clock (`performance.now()`): a wall clock set back an hour kept one id for the hour.
 * @example sharedErrorId("the store failed: Redis is unavailable (ECONNREFUSED)") // "3f9c0e1a7b2d"
 */
export function sharedErrorId(kind: string, nowMs = performance.now()): string {
  const known = ids.get(kind);
  if (known !== undefined && nowMs < known.untilMs) return known.id;
  const id = randomBytes(6).toString("hex");
  if (ids.size >= MAX_KINDS) for (const [k, v] of ids) if (v.untilMs <= nowMs) ids.delete(k);
  if (ids.size < MAX_KINDS) ids.set(kind, { id, untilMs: nowMs + REPEAT_WINDOW_MS });
  return id;
}
