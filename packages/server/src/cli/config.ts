import { loadRulesFile } from "../config/load.js";
import { RulesError } from "../config/rules.js";
import { UsageError, type Command } from "./command.js";

/**
 * `ratekeeper config check PATH...`: validates rules files or directories of them (ratekeeper's
 * form or envoyproxy/ratelimit's), each on its own: a line `PATH: ok (...)` or every error with
 * its path; exits 1 if any is bad. `MERGE_DOMAIN_CONFIG=true` merges a domain split over the
 * files of a directory, as envoyproxy/ratelimit does.
 */
export const CONFIG_CHECK_COMMAND: Command = {
  words: ["config", "check"],
  args: "PATH...",
  summary:
    "validate rules files or directories (ours or envoyproxy/ratelimit's); prints every error with its path and exits 1 if there is any",
  flags: {},
  flagHelp: {},
  run(_v, positionals) {
    if (positionals.length === 0) throw new UsageError("config check: give at least one PATH (a rules file or a directory of them)");
    const mergeDomains = process.env.MERGE_DOMAIN_CONFIG === "true";
    let bad = 0;
    for (const file of positionals) {
      try {
        const rules = loadRulesFile(file, { mergeDomains });
        process.stdout.write(
          `${file}: ok (${rules.domains.size} domains, ${rules.rules.length} rules, ${rules.policies.size} named policies)\n`,
        );
      } catch (e) {
        if (!(e instanceof RulesError)) throw e;
        process.stderr.write(`${e.message}\n`);
        bad++;
      }
    }
    return Promise.resolve(bad > 0 ? 1 : 0);
  },
};
