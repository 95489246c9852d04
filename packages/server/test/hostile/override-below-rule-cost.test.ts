/**
 * An override whose own limits admit less than the cost the rules give one request of its key
 * (the rule's `cost`, not the client's) is the operator's configuration: the HTTP API denies
 * every check of that key (200 with `allowed: false`, `/v1/auth` 429), as the Envoy RLS routes
 * already did, and says why, and the service logs it once per override and rule with the error
 * id the answer names. Before, every HTTP check of such a key was answered 400 ("cost: 5 is more
 * than the override for heavy=a could ever admit"), blaming each client, and nothing was logged.
 * A cost the client sent that the override cannot admit is still the client's 400, naming it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStore } from "ratekeeper";
import { DecisionService, parseRules } from "../../src/index.js";
import type { Override, OverrideLookup } from "../../src/overrides/types.js";
import { captureLog, idIn, serveHttp } from "./failing-parts.js";

const RULES = `
domain: d
descriptors:
  - key: heavy
    cost: 5
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: light
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
const MSG = "override admits less than its rule's cost: every check of its key is denied";

/** Overrides of at most 3 a minute for `heavy=a` and `light=a`. */
function overrides(): OverrideLookup {
  const made = new Map<string, Override>();
  for (const key of ["heavy=a", "light=a"])
    made.set(key, { domain: "d", key, policy: { limits: [{ algorithm: "fixed-window", limit: 3, window: "1m" }] } });
  return { get: (domain, key) => (domain === "d" ? made.get(key) : undefined) };
}

let close: (() => void) | undefined;
afterEach(() => close?.());

async function serve() {
  const { lines, logger } = captureLog();
  const service = new DecisionService({ store: new MemoryStore(), rules: parseRules(RULES, "rules.yaml"), overrides: overrides(), logger });
  const s = await serveHttp(service);
  close = s.close;
  const check = async (body: object) => {
    const r = await fetch(`${s.url}/v1/check`, { method: "POST", body: JSON.stringify(body) });
    return { status: r.status, json: (await r.json()) as Record<string, any> };
  };
  return { url: s.url, lines, check };
}

describe("an override that admits less than its rule's cost", () => {
  it("denies every HTTP check of its key, and logs it once with the id the answer names", async () => {
    const { url, lines, check } = await serve();
    for (let i = 0; i < 3; i++) {
      const r = await check({ domain: "d", descriptors: [{ heavy: "a" }] });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.json.allowed).toBe(false);
      expect(r.json.statuses[0]).toMatchObject({ allowed: false, remaining: 0, limit: 3 });
      const why = r.json.statuses[0].explain.why as string;
      expect(why).toContain("rule d/heavy costs 5 a request, more than this override could ever admit (at most 3)");
      const id = idIn(why);
      expect(id).toBeDefined();
      const logged = lines.filter((l) => l.msg === MSG);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ domain: "d", key: "heavy=a", rule: "d/heavy", ruleCost: 5, overrideAdmitsAtMost: 3, errorId: id });
    }
    const auth = await fetch(`${url}/v1/auth?domain=d&d=heavy%3Da`);
    expect(auth.status).toBe(429);
    expect(lines.filter((l) => l.msg === MSG)).toHaveLength(1);
  });

  it("a cost the client sent that the override cannot admit stays the client's 400", async () => {
    const { lines, check } = await serve();
    const r = await check({ domain: "d", descriptors: [{ light: "a" }], cost: 4 });
    expect(r.status).toBe(400);
    expect(r.json.message).toBe("cost: 4 is more than the override for light=a could ever admit (at most 3)");
    // A cost the override admits is decided.
    expect((await check({ domain: "d", descriptors: [{ light: "a" }], cost: 3 })).json.allowed).toBe(true);
    expect(lines.filter((l) => l.msg === MSG)).toHaveLength(0);
  });
});
