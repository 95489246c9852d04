import { loadRulesFile } from "../config/load.js";
import { RulesError } from "../config/rules.js";
import { positive, UsageError, type Command } from "./command.js";

/**
 * `ratekeeper config check PATH...`: validates rules files or directories of them (ratekeeper's
 * form or envoyproxy/ratelimit's), each on its own: a line `PATH: ok (...)` or every error with
 * its path; exits 1 if any is bad. `MERGE_DOMAIN_CONFIG=true` merges a domain split over the
 * files of a directory, as envoyproxy/ratelimit does. Its verdict is `serve`'s: the same loader,
 * the same size bound per file, and empty rules refused unless --allow-empty-rules.
 */
export const CONFIG_CHECK_COMMAND: Command = {
  words: ["config", "check"],
  args: "PATH...",
  summary:
    "validate rules files or directories (ours or envoyproxy/ratelimit's); prints every error with its path and exits 1 if there is any",
  flags: { "max-rules-bytes": { type: "string" }, "allow-empty-rules": { type: "boolean" } },
  flagHelp: {
    "max-rules-bytes": "BYTES  largest rules file read, as serve's flag; larger ones are refused [default 4194304]",
    "allow-empty-rules": "accept a file or directory with no rules, as serve's flag (refused otherwise: serve would limit nothing)",
  },
  run(v, positionals) {
    if (positionals.length === 0) throw new UsageError("config check: give at least one PATH (a rules file or a directory of them)");
    const mergeDomains = process.env.MERGE_DOMAIN_CONFIG === "true";
    const maxRaw = v["max-rules-bytes"];
    const maxBytes = positive(typeof maxRaw === "string" ? maxRaw : undefined, "--max-rules-bytes");
    const allowEmpty = v["allow-empty-rules"] === true;
    let bad = 0;
    for (const file of positionals) {
      try {
        const rules = loadRulesFile(file, { mergeDomains, maxBytes, allowEmpty });
        // Pools too: a file of `concurrency:` pools only is valid rules and must not read as empty.
        const pools = rules.pools.size > 0 ? `, ${rules.pools.size} concurrency pools` : "";
        process.stdout.write(
          `${file}: ok (${rules.domains.size} domains, ${rules.rules.length} rules, ${rules.policies.size} named policies${pools})\n`,
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
