/**
 * envoyproxy/ratelimit's config files as its loader reads them (src/config/config_impl.go, with
 * gopkg.in/yaml.v2), where a file's verdict or meaning could differ from ratekeeper's:
 * - `requests_per_unit` is a uint32: a larger number is refused (yaml.v2 cannot unmarshal it),
 *   and a `current_limit` never carries more than 4294967295 (the proto's uint32);
 * - a `key`, `value` or `domain` written as a number or a boolean is its text (`value: 200` is
 *   "200", `0x1F` stays "0x1F"), as yaml.v2 reads a scalar into a string; a float there is
 *   refused, as its key validation refuses one;
 * - a field left empty (`value:`, `rate_limit:`, `descriptors:`) is its zero value: no value,
 *   no limit, no nested descriptors;
 * - YAML merge keys (`<<: *base`) merge, as in yaml.v2;
 * - `quota_mode: true` (its soft limits): a quota descriptor over its limit says OVER_LIMIT in its
 *   status, but the request is OVER_LIMIT only when every quota descriptor of it is over (or an
 *   ordinary one is);
 * - in a config directory, a file without an extension (a Kubernetes ConfigMap key such as
 *   `ratelimit`) is a config file, as its runtime loader reads every file there.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRulesFile, parseRules } from "../src/config/load.js";
import { matchDescriptor } from "../src/config/match.js";
import { RulesError } from "../src/config/rules.js";
import { clearOfMinuteEdge, serveRules, type InProcessService } from "./in-process.js";
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

describe("scalars and empty fields, as yaml.v2 reads them", () => {
  const ruleFor = (text: string, domain: string, entries: Array<[string, string]>) =>
    matchDescriptor(
      parseRules(text, "c.yaml"),
      domain,
      entries.map(([key, value]) => ({ key, value })),
    ).rule?.id;

  it("a number or a boolean as key, value or domain is its text", () => {
    const text = [
      "domain: 123",
      "descriptors:",
      "  - key: status",
      "    value: 200",
      "    rate_limit: { unit: second, requests_per_unit: 1 }",
      "  - key: flag",
      "    value: true",
      "    rate_limit: { unit: second, requests_per_unit: 1 }",
      "  - key: 42",
      "    value: 0x1F",
      "    rate_limit: { unit: second, requests_per_unit: 1 }",
      "",
    ].join("\n");
    expect(ruleFor(text, "123", [["status", "200"]])).toBe("123/status=200");
    expect(ruleFor(text, "123", [["flag", "true"]])).toBe("123/flag=true");
    expect(ruleFor(text, "123", [["42", "0x1F"]])).toBe("123/42=0x1F");
  });

  it("a float as a value is refused, as its key validation refuses it", () => {
    expect(refusal("domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n")).toMatch(/c\.yaml:4:\d+: .*descriptors\[0\]\.value/);
  });

  it("an empty value, rate_limit or descriptors is none", () => {
    const text = [
      "domain: d",
      "descriptors:",
      "  - key: any",
      "    value:",
      "    rate_limit: { unit: second, requests_per_unit: 1 }",
      "  - key: nothing",
      "    rate_limit:",
      "    descriptors:",
      "    shadow_mode:",
      "",
    ].join("\n");
    const rules = parseRules(text, "c.yaml");
    expect(matchDescriptor(rules, "d", [{ key: "any", value: "x" }]).rule?.id).toBe("d/any");
    expect(matchDescriptor(rules, "d", [{ key: "nothing", value: "x" }]).rule).toBeUndefined();
    expect(rules.rules).toHaveLength(1);
  });

  it("an empty field of ratekeeper's own form is still refused (only envoyproxy/ratelimit's keys are its zero value)", () => {
    const own =
      "domains:\n  - domain: d\n    descriptors:\n      - key: k\n        algorithm: fixed-window\n        limit: 5\n        window: 1m\n        cost:\n";
    expect(refusal(own)).toMatch(/c\.yaml:8:\d+: .*descriptors\[0\]\.cost/);
  });

  it("merge keys merge", () => {
    const text = [
      "domain: d",
      "descriptors:",
      "  - &base",
      "    key: a",
      "    rate_limit: { unit: minute, requests_per_unit: 7 }",
      "  - <<: *base",
      "    key: b",
      "",
    ].join("\n");
    const rules = parseRules(text, "c.yaml");
    expect(rules.rules.map((r) => [r.id, r.limits[0]?.limit])).toEqual([
      ["d/a", 7],
      ["d/b", 7],
    ]);
  });

  it("an alias bomb is still refused, merge keys or not", () => {
    const bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 9; i++)
      bomb.push(
        `${"abcdefghij"[i]}: &${"abcdefghij"[i]} [${Array(10)
          .fill(`*${"abcdefghij"[i - 1]}`)
          .join(", ")}]`,
      );
    const merges = ["m0: &m0 { k: 1 }"];
    for (let i = 1; i < 200; i++) merges.push(`m${i}: &m${i}\n  <<: *m${i - 1}\n  k${i}: 1`);
    for (const text of [bomb.join("\n"), merges.join("\n")]) {
      const t0 = Date.now();
      expect(refusal(text + "\ndomain: d\n")).toMatch(/c\.yaml/);
      expect(Date.now() - t0).toBeLessThan(2000);
    }
  });
});

describe("a config directory, as its runtime loader reads it", () => {
  it("a file without an extension is read (not skipped, which left the service limiting nothing)", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "rk-envoy-dir-"));
    try {
      mkdirSync(path.join(dir, "nested"));
      writeFileSync(path.join(dir, "ratelimit"), oneLimit("{ unit: second, requests_per_unit: 1 }"));
      writeFileSync(
        path.join(dir, "nested", "other.yaml"),
        oneLimit("{ unit: second, requests_per_unit: 1 }").replace("domain: d", "domain: e"),
      );
      writeFileSync(path.join(dir, ".hidden"), "not: yaml: at all: [");
      const rules = loadRulesFile(dir);
      expect([...rules.domains.keys()].sort()).toEqual(["d", "e"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("quota_mode, as its service decides the overall code", () => {
  let svc: InProcessService;
  let rls: RlsClient;
  beforeAll(async () => {
    await clearOfMinuteEdge();
    svc = await serveRules(
      [
        "domain: q",
        "descriptors:",
        "  - key: service",
        "    value: one",
        "    quota_mode: true",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "  - key: service",
        "    value: many",
        "    quota_mode: true",
        "    rate_limit: { unit: minute, requests_per_unit: 100 }",
        "  - key: user",
        "    rate_limit: { unit: minute, requests_per_unit: 100 }",
        "",
      ].join("\n"),
    );
    rls = rlsClient(svc.grpcPort);
  });
  afterAll(async () => {
    rls?.close();
    await svc?.close();
  });
  const d = (key: string, value: string) => ({ entries: [{ key, value }] });
  type Answer = { overall_code: string; statuses: Array<{ code: string }> };
  const ask = async (...descriptors: object[]) => (await rls.shouldRateLimit({ domain: "q", descriptors })) as Answer;

  it("one quota descriptor over while another is not: the request is OK, the status says OVER_LIMIT", async () => {
    expect((await ask(d("service", "one"), d("service", "many"))).overall_code).toBe("OK");
    const r = await ask(d("service", "one"), d("service", "many"));
    expect(r.statuses.map((s) => s.code)).toEqual(["OVER_LIMIT", "OK"]);
    expect(r.overall_code).toBe("OK");
  });

  it("every quota descriptor over: OVER_LIMIT, with or without an ordinary descriptor that is OK", async () => {
    expect((await ask(d("service", "one"))).overall_code).toBe("OVER_LIMIT");
    expect((await ask(d("service", "one"), d("user", "u"))).overall_code).toBe("OVER_LIMIT");
  });
});

describe("start with no rules", () => {
  it("an empty rules file or directory is refused at start, as on reload, unless allowEmptyRules (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)", async () => {
    await expect(serveRules("")).rejects.toThrow(/no domain, policy or pool/);
    await expect(serveRules("# all commented out\n")).rejects.toThrow(/no domain, policy or pool/);
    const svc = await serveRules("", { allowEmptyRules: true });
    await svc.close();
  });
});
