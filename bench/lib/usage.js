// `--help` (or `-h`) on a bench script's command line: print the script's opening comment, which
// says what it measures and how to run it, and exit, rather than start a run that can take
// minutes and load the machine (the scripts otherwise ignore flags they do not know).

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Prints the opening `//` comment of the module at `moduleUrl` and exits 0 when argv asks for help. */
export function helpOnRequest(moduleUrl, argv = process.argv.slice(2)) {
  if (!argv.includes("--help") && !argv.includes("-h")) return;
  const text = [];
  for (const line of readFileSync(fileURLToPath(moduleUrl), "utf8").split("\n")) {
    if (line.startsWith("//")) text.push(line.replace(/^\/\/ ?/, ""));
    else if (line.trim() === "") text.push("");
    else break;
  }
  console.log(text.join("\n").trim());
  process.exit(0);
}
