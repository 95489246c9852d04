/**
 * envoyproxy/ratelimit's `replaces`, applied at decision time as its service does
 * (src/service/ratelimit.go, `constructLimitsToCheck`): when one descriptor of a request matches
 * a limit whose `replaces` lists a name, every other descriptor of that request whose matched
 * limit has that `name` is not limited (OK, no current_limit, 0 remaining) and is not charged.
 * Over gRPC with the official protos. The rules are its README's Example 7 and the banned /
 * override pair of its examples/ratelimit/config/example.yaml, in minutes (not seconds) so a
 * window cannot end in the middle of a test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearOfMinuteEdge, serveRules, type InProcessService } from "./in-process.js";
import { rlsClient, type RlsClient } from "./support.js";

const CONFIG = `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: minute
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: minute
  - key: free
    rate_limit:
      unlimited: true
      replaces:
        - name: specific_limit
  - key: named_unlimited
    rate_limit:
      unlimited: true
      name: open_limit
  - key: opener
    rate_limit:
      replaces:
        - name: open_limit
      requests_per_unit: 3
      unit: minute
  - key: bar
    value: banned
    rate_limit:
      name: banned_limit
      unit: minute
      requests_per_unit: 0
  - key: destination_cluster
    value: override
    rate_limit:
      replaces:
        - name: banned_limit
      unit: minute
      requests_per_unit: 2
`;

let svc: InProcessService;
let rls: RlsClient;

beforeAll(async () => {
  await clearOfMinuteEdge(); // its counts are in minute windows aligned on the clock
  svc = await serveRules(CONFIG);
  rls = rlsClient(svc.grpcPort);
});

afterAll(async () => {
  rls?.close();
  await svc?.close();
});

const d = (...kv: string[]) => ({ entries: kv.map((s) => ({ key: s.split("=")[0], value: s.split("=")[1] ?? "" })) });
const ask = (...descriptors: object[]) => rls.shouldRateLimit({ domain: "example7", descriptors });
const notLimited = { code: "OK", limit_remaining: 0, current_limit: null, duration_until_reset: null };

describe("replaces, at decision time (envoyproxy/ratelimit's README, Example 7)", () => {
  it("the replaced limit is not applied and not charged; the replacing one is", async () => {
    const specific = d("key_1=value_1", "user=a");
    const replacing = d("key_2=value_2", "user=a");
    for (let i = 1; i <= 7; i++) {
      const r = await ask(specific, replacing);
      expect(r.overall_code, `request ${i}`).toBe("OK");
      expect(r.statuses[0], `request ${i}`).toMatchObject(notLimited);
      expect(r.statuses[1], `request ${i}`).toMatchObject({
        code: "OK",
        limit_remaining: 10 - i,
        current_limit: { requests_per_unit: 10, unit: "MINUTE", name: "" },
      });
    }
    // Alone, the specific limit applies, with all 5 left: the 7 requests above never charged it.
    const alone = await ask(specific);
    expect(alone.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4, current_limit: { name: "specific_limit" } });
  });

  it("order does not matter: the replacing descriptor may come first", async () => {
    const r = await ask(d("key_2=value_2", "user=b"), d("key_1=value_1", "user=b"));
    expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 9 });
    expect(r.statuses[1]).toMatchObject(notLimited);
  });

  it("a limit of 0 (banned) is lifted by a descriptor that replaces it, and only in that request", async () => {
    const banned = d("bar=banned");
    expect((await ask(banned)).overall_code).toBe("OVER_LIMIT");
    const r = await ask(banned, d("destination_cluster=override"));
    expect(r.overall_code).toBe("OK");
    expect(r.statuses[0]).toMatchObject(notLimited);
    expect(r.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 1 });
  });

  it("an unlimited limit still replaces; a named unlimited one stays unlimited when replaced", async () => {
    const r = await ask(d("key_1=value_1", "user=c"), d("free=x"));
    expect(r.statuses[0]).toMatchObject(notLimited);
    expect(r.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 4_294_967_295 });
    const u = await ask(d("named_unlimited=x"), d("opener=x"));
    expect(u.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4_294_967_295 });
    expect(u.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 2 });
  });

  it("a descriptor with its own limit (Envoy route config) neither replaces nor is replaced", async () => {
    const own = { ...d("key_1=value_1", "user=e"), limit: { requests_per_unit: 2, unit: "MINUTE" } };
    const r = await ask(own, d("key_2=value_2", "user=e"));
    expect(r.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 1, current_limit: { requests_per_unit: 2 } });
    expect(r.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 9 });
  });
});
