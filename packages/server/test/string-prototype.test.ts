/**
 * `String.prototype` stays an object with fast properties in V8 once the service's modules are
 * loaded (src/string-prototype.ts says why it matters). Checked in a child process run with
 * `--allow-natives-syntax`, the only way to ask V8 (`%HasFastProperties`), on the built modules
 * that `ratekeeper serve` loads, ioredis among them.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ROOT } from "./support.js";

/** Whether String.prototype has fast properties after importing `modules` (built, under packages/server/dist). */
function fastAfter(modules: readonly string[], then = ""): string {
  const urls = modules.map((m) => pathToFileURL(path.join(ROOT, "packages/server/dist", m)).href);
  const code = `for (const u of ${JSON.stringify(urls)}) await import(u);\n${then}\nprocess.stdout.write(String(%HasFastProperties(String.prototype)));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", code], { encoding: "utf8" });
  expect(r.stderr).toBe("");
  return r.stdout;
}

describe("String.prototype in the service's process", () => {
  it("has fast properties after the serve command's modules (and ioredis) are loaded", () => {
    expect(fastAfter(["cli.js", "redis-client.js"])).toBe("true");
  });

  it("stays so when another class extends String later", () => {
    expect(fastAfter(["cli.js", "redis-client.js"], "class Later extends String {}; void Later;")).toBe("true");
  });
});
