import { describeValue, type ConfigIssue } from "../core/errors.js";
import type { RateLimiter } from "../limiter.js";
import type { KeyInfo } from "./keys.js";
import { isPlainObject } from "../core/plain-object.js";
import { costTooHigh } from "../core/max-cost.js";

/** Cost of a request: a number, a table (`{ "GET /user": 1, "POST /user": 2 }`), or a function. */
export type CostOption<Req> = number | Readonly<Record<string, number>> | ((req: Req, info: KeyInfo) => number);

/**
 * The cost of a request, from the `cost` option. A table is matched on `"METHOD route"` (for
 * HEAD, then `"GET route"`), then `"route"`; unmatched requests cost 1. `needsInfo` says whether
 * it reads the request's method and route (a fixed cost does not, so the common path builds no {@link KeyInfo}).
 */
export interface CostRule<Req> {
  readonly needsInfo: boolean;
  of(req: Req, info: KeyInfo | undefined): number;
}

/** A request's cost the limiter cannot take, and whether it is more than the policy ever admits (a 429, not a 500). */
export interface BadCost {
  readonly error: RangeError;
  readonly tooHigh: { readonly cost: number; readonly maxCost: number; readonly policies: string[] } | undefined;
}

/**
 * Checks a request's cost (a cost function's answer, which may come from the client: a batch
 * size) before the limiter sees it: undefined when the limiter takes it.
 * @example checkCost(NaN, limiter)?.error.message // "cost: must be a positive whole number of cost units (got NaN)"
 */
export function checkCost(cost: unknown, limiter: RateLimiter): BadCost | undefined {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) {
    return {
      error: new RangeError(`cost: must be a positive whole number of cost units (got ${describeValue(cost)})`),
      tooHigh: undefined,
    };
  }
  // maxCost may be missing on a limiter from an older copy of the package: it then checks for itself.
  const maxCost = limiter.maxCost as number | undefined;
  if (typeof maxCost !== "number" || cost <= maxCost) return undefined;
  return {
    error: costTooHigh(cost, maxCost),
    tooHigh: { cost, maxCost, policies: limiter.limits.filter((l) => l.capacity < cost).map((l) => l.name) },
  };
}

/**
 * Compiles the `cost` option; problems are added to `issues`, each naming its path.
 * Table keys are normalised (`"get  /user"` matches `"GET /user"`).
 * @param maxCost the most the policy ever admits at once: a fixed cost or a table entry above it is refused here
 */
export function compileCost<Req>(cost: CostOption<Req> | undefined, issues: ConfigIssue[], maxCost = Infinity): CostRule<Req> {
  if (cost === undefined) return fixed(1);
  if (typeof cost === "number") {
    if (!Number.isSafeInteger(cost) || cost <= 0)
      issues.push({ path: "cost", message: `must be a positive whole number (got ${describeValue(cost)})` });
    else if (cost > maxCost)
      issues.push({ path: "cost", message: `${cost} is more than the policy could ever admit (at most ${maxCost})` });
    return fixed(cost);
  }
  if (typeof cost === "function") return { needsInfo: true, of: (req, info) => cost(req, info as KeyInfo) };
  // A table is an object literal: a Map's entries are no properties (it would read as an empty table).
  if (isPlainObject(cost)) {
    const table: Record<string, number> = {};
    for (const [k, v] of Object.entries(cost)) {
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0)
        issues.push({ path: `cost["${k}"]`, message: `must be a positive whole number (got ${describeValue(v)})` });
      else if (v > maxCost)
        issues.push({ path: `cost["${k}"]`, message: `${v} is more than the policy could ever admit (at most ${maxCost})` });
      table[normaliseRoute(k)] = v;
    }
    // Express folds paths as its router matches them (lower case, no trailing slash: adapters/express-access.ts);
    // an entry written otherwise also answers for its folded spelling, unless one is given.
    for (const [k, v] of Object.entries(table)) table[foldRoute(k)] ??= v;
    return {
      needsInfo: true,
      of: (_req, info) => {
        const i = info as KeyInfo;
        // HEAD runs the GET handler (Express, Fastify, Hono: only the body is dropped), so it pays the GET's price.
        const head = i.method === "HEAD" ? table[`GET ${i.route}`] : undefined;
        return table[`${i.method} ${i.route}`] ?? head ?? table[i.route] ?? 1;
      },
    };
  }
  issues.push({ path: "cost", message: `must be a number, a table or a function (got ${describeValue(cost)})` });
  return fixed(1);
}

function fixed<Req>(n: number): CostRule<Req> {
  return { needsInfo: false, of: () => n };
}

/** `" get   /user "` -> `"GET /user"`: one space, an upper-case method. */
function normaliseRoute(k: string): string {
  return k
    .trim()
    .replace(/\s+/g, " ")
    .replace(/^[a-z]+ /, (m) => m.toUpperCase());
}

/** `"GET /Users/"` -> `"GET /users"`: the path part in lower case, without a trailing slash. */
function foldRoute(k: string): string {
  const space = k.indexOf(" ");
  const path = k.slice(space + 1).toLowerCase();
  return `${k.slice(0, space + 1)}${path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path}`;
}
