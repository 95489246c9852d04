/**
 * envoyproxy/ratelimit's config files as its loader reads them (src/config/config_impl.go, with
 * gopkg.in/yaml.v2), where a file's verdict or meaning could differ from ratekeeper's:
 * - `requests_per_unit` is a uint32: a larger number is refused (yaml.v2 cannot unmarshal it),
 *   and a `current_limit` never carries more than 4294967295 (the proto's uint32);
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRules } from "../src/config/load.js";
import { RulesError } from "../src/config/rules.js";
import { serveRules, type InProcessService } from "./in-process.js";
import { rlsClient, type RlsClient } from "./support.js";

function refusal(text: string): string {
  try {
    parseRules(text, "c.yaml");
  } catch (e) {
    if (e instanceof RulesError) return e.message;
    throw e;
  }
  throw new Error("expected the file to be refused");
}

const oneLimit = (rateLimit: string) => `domain: d\ndescriptors:\n  - key: k\n    rate_limit: ${rateLimit}\n`;

describe("requests_per_unit is a uint32, as there", () => {
  it("4294967296 is refused naming the field; 4294967295 is taken", () => {
    expect(refusal(oneLimit("{ unit: second, requests_per_unit: 4294967296 }"))).toMatch(
      /c\.yaml:4:\d+: .*rate_limit\.requests_per_unit: must be at most 4294967295/,
    );
    expect(parseRules(oneLimit("{ unit: second, requests_per_unit: 4294967295 }"), "c.yaml").rules[0]?.limits[0]?.limit).toBe(
      4_294_967_295,
    );
  });
});

describe("current_limit over gRPC is within the proto's uint32", () => {
  let svc: InProcessService;
  let rls: RlsClient;
  beforeAll(async () => {
    svc = await serveRules(
      "domains:\n  - domain: d\n    descriptors:\n      - key: big\n        algorithm: fixed-window\n        limit: 5000000000\n        window: 1s\n",
    );
    rls = rlsClient(svc.grpcPort);
  });
  afterAll(async () => {
    rls?.close();
    await svc?.close();
  });

  it("a ratekeeper policy above 4294967295 reports 4294967295, not the number wrapped around (705032704)", async () => {
    const r = (await rls.shouldRateLimit({ domain: "d", descriptors: [{ entries: [{ key: "big", value: "x" }] }] })) as {
      statuses: Array<{ current_limit: { requests_per_unit: number }; limit_remaining: number }>;
    };
    expect(r.statuses[0]?.current_limit.requests_per_unit).toBe(4_294_967_295);
    expect(r.statuses[0]?.limit_remaining).toBe(4_294_967_295);
  });
});
