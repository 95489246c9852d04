#!/usr/bin/env node
/**
 * The `ratekeeper` executable (`node dist/cli.js`, or the `ratekeeper` bin). The command line
 * itself lives in cli/: the table of commands in cli/main.ts, one module per command.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { main } from "./cli/main.js";
import { closeLogs } from "./log.js";

export { main, COMMANDS, type Command } from "./cli/main.js";

// Run when executed (node dist/cli.js, or the `ratekeeper` bin symlink), not when imported.
const self = fileURLToPath(import.meta.url);
if (process.argv[1] && realpathSync(process.argv[1]) === self) {
  main(process.argv.slice(2)).then(exit, (e: unknown) => {
    process.stderr.write(`ratekeeper: ${(e as Error).stack ?? String(e)}\n`);
    return exit(1);
  });
}

/** Exits with `code` once the log lines still held are written, or after the bounded wait (log.ts closeLogs). */
async function exit(code: number): Promise<never> {
  await closeLogs();
  process.exit(code);
}
