// Runs the benchmark sections: every `bench/<section>.js` in the order below, each in its own
// `node` process (so one section's heap, timers and JIT state cannot colour the next), or only
// the sections named on the command line: `npm run bench -- memory redis`.
// A section whose file does not exist yet is reported and skipped.
// Arguments after `--` go to every section: `npm run bench -- memory -- --runs 9 --markdown`.
//
// Sections are plain ESM scripts importing the built packages (`npm run bench` builds first).

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { helpOnRequest } from "./lib/usage.js";

helpOnRequest(import.meta.url);

/** The sections, in the order they run. */
export const SECTIONS = [
  "memory",
  "redis",
  "redis-client",
  "overload",
  "outage",
  "lease",
  "http",
  "overhead",
  "service",
  "overrides",
  "dashboard",
];

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const names = dash >= 0 ? argv.slice(0, dash) : argv;
const passThrough = dash >= 0 ? argv.slice(dash + 1) : [];

const unknown = names.filter((n) => !SECTIONS.includes(n) && !existsSync(join(here, `${n}.js`)));
if (unknown.length > 0) {
  console.error(`bench: unknown section(s) ${unknown.join(", ")}; known: ${SECTIONS.join(", ")}`);
  process.exit(2);
}
const chosen = names.length > 0 ? names : SECTIONS;

function runSection(file, name) {
  return new Promise((resolve) => {
    // --expose-gc: sections collect garbage between samples so one sample's garbage is not
    // charged to the next.
    const child = spawn(process.execPath, ["--expose-gc", file, ...passThrough], { stdio: "inherit" });
    const forward = (sig) => child.kill(sig);
    process.once("SIGINT", forward);
    process.once("SIGTERM", forward);
    child.on("exit", (code, signal) => {
      process.off("SIGINT", forward);
      process.off("SIGTERM", forward);
      resolve(signal ? `killed by ${signal}` : code === 0 ? "ok" : `exit code ${code}`);
    });
  });
}

const summary = [];
for (const name of chosen) {
  const file = join(here, `${name}.js`);
  if (!existsSync(file)) {
    console.log(`\n=== ${name}: skipped (bench/${name}.js does not exist yet)`);
    summary.push([name, "skipped: no bench file"]);
    continue;
  }
  console.log(`\n=== ${name} (bench/${name}.js)\n`);
  const t0 = Date.now();
  const result = await runSection(file, name);
  summary.push([name, `${result} in ${((Date.now() - t0) / 1000).toFixed(0)} s`]);
}
console.log("\n=== summary");
for (const [name, result] of summary) console.log(`${name.padEnd(10)} ${result}`);
if (summary.some(([, r]) => !r.startsWith("ok") && !r.startsWith("skipped"))) process.exitCode = 1;
