/**
 * `String.prototype` keeps fast properties in V8 once a RateLimiter exists, whether ioredis (whose
 * `class VerbatimString extends String` turns it into a slow dictionary-mode object) was loaded
 * before or after (src/string-prototype.ts says why it matters: string methods everywhere in the
 * process become generic calls). Checked in child processes run with `--allow-natives-syntax`,
 * the only way to ask V8 (`%HasFastProperties`), on the built library.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const LIB = pathToFileURL(fileURLToPath(new URL("../dist/index.js", import.meta.url))).href;
const LIMITER = `new RateLimiter({ algorithm: "fixed-window", limit: 5, window: "1s" });`;

/** Runs `code` (an ES module with `RateLimiter` imported) and returns %HasFastProperties(String.prototype). */
function fastAfter(code: string): string {
  const script = `import { RateLimiter } from ${JSON.stringify(LIB)};\n${code}\nprocess.stdout.write(String(%HasFastProperties(String.prototype)));`;
  const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  expect(r.stderr).toBe("");
  return r.stdout;
}

describe("String.prototype with ratekeeper in the process", () => {
  it("is made slow by a class extending String, which is what this guards against", () => {
    expect(fastAfter("class Verbatim extends String {}; void Verbatim; void RateLimiter;")).toBe("false");
  });

  it("is fast again once a RateLimiter is built after ioredis was loaded", () => {
    expect(fastAfter(`await import("ioredis");\n${LIMITER}`)).toBe("true");
  });

  it("stays fast when ioredis is loaded after the first RateLimiter", () => {
    expect(fastAfter(`${LIMITER}\nawait import("ioredis");`)).toBe("true");
  });
});
