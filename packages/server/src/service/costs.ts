/**
 * A check's costs, checked in one place for every transport (they pass on what the caller sent):
 * the request's cost, and a descriptor's own cost (Envoy's per-descriptor `hits_addend`).
 */
import type { Decision } from "ratekeeper";
import { CheckError } from "./types.js";

/** The largest request cost a check may carry (before the rule's own `cost` multiplies it). */
export const MAX_COST = 1_000_000_000;

/**
 * The request's cost.
 * @throws CheckError unless a whole number from 1 to {@link MAX_COST}
 */
export function requestCost(cost: unknown): number {
  if (cost === undefined) return 1;
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0 || cost > MAX_COST) {
    throw new CheckError(`cost: must be a whole number from 1 to ${MAX_COST} (got ${JSON.stringify(cost)})`);
  }
  return cost;
}

/**
 * A descriptor's own cost, or the check's when it has none. 0 is allowed: check only, charge
 * nothing (envoyproxy/ratelimit's meaning of a per-descriptor `hits_addend` of 0).
 * @throws CheckError naming `descriptors[i].hits_addend` unless a whole number from 0 to {@link MAX_COST}
 */
export function descriptorCost(own: unknown, checkCost: number, i: number): number {
  if (own === undefined) return checkCost;
  if (typeof own !== "number" || !Number.isSafeInteger(own) || own < 0 || own > MAX_COST)
    throw new CheckError(`descriptors[${i}].hits_addend: must be a whole number from 0 to ${MAX_COST} (got ${JSON.stringify(own)})`);
  return own;
}

/**
 * A decision as the check asked for it: `oversize` (a cost no policy could admit, Envoy's RLS) is
 * a denial with 0 remaining; `check-only` (cost 0) reports the units left before a request, not
 * after one.
 */
export function adjusted(d: Decision, kind: "charged" | "check-only" | "oversize", cost: number): Decision {
  if (kind === "oversize") return { ...d, allowed: false, remaining: 0, retryAfterMs: d.resetAfterMs };
  if (kind === "check-only" && d.allowed) return { ...d, remaining: d.remaining + cost };
  return d;
}
