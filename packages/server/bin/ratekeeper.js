#!/usr/bin/env node
// The `ratekeeper` command. A committed launcher rather than dist/cli.js itself, so that npm links
// the bin at install time, before dist/ is built (`npm run build`).
import { main } from "../dist/cli.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`ratekeeper: ${e?.stack ?? String(e)}\n`);
    process.exit(1);
  },
);
