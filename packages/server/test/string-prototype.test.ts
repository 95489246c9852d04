/**
 * `String.prototype` keeps fast properties in V8 in the service's process (the library's
 * src/string-prototype.ts says why it matters: ioredis, which the service loads, would otherwise
 * leave every string method a generic call). Checked in a child process run with
 * `--allow-natives-syntax`, the only way to ask V8 (`%HasFastProperties`), after loading the
 * built modules `ratekeeper serve` loads, ioredis among them, and deciding a first check (which
 * builds the rule's RateLimiter).
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ROOT } from "./support.js";

describe("String.prototype in the service's process", () => {
  it("has fast properties once the serve command's modules (and ioredis) are loaded and a check decided", () => {
    const dist = (m: string) => JSON.stringify(pathToFileURL(path.join(ROOT, "packages/server/dist", m)).href);
    const lib = JSON.stringify(pathToFileURL(path.join(ROOT, "packages/ratekeeper/dist/index.js")).href);
    const code = [
      `await import(${dist("cli.js")}); await import(${dist("redis-client.js")});`,
      `const { loadRulesFile } = await import(${dist("config/load.js")});`,
      `const { DecisionService } = await import(${dist("service/decide.js")});`,
      `const { MemoryStore } = await import(${lib});`,
      `const rules = loadRulesFile(${JSON.stringify(path.join(ROOT, "examples/rules.yaml"))});`,
      `const svc = new DecisionService({ store: new MemoryStore(), rules });`,
      `await svc.decide({ domain: "web", descriptors: [[{ key: "remote_address", value: "1.2.3.4" }]] });`,
      `process.stdout.write(String(%HasFastProperties(String.prototype)));`,
    ].join("\n");
    const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", code], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("true");
  });
});
