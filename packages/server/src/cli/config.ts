import { loadRulesFile } from "../config/load.js";
import { RulesError } from "../config/rules.js";
import { UsageError, type Command } from "./command.js";

/** `ratekeeper config check FILE`: validates a rules file, every error with its path. */
export const CONFIG_CHECK_COMMAND: Command = {
  words: ["config", "check"],
  args: "FILE",
  summary: "validate a rules file; prints every error with its path and exits 1 if there is any",
  flags: {},
  flagHelp: {},
  run(_v, positionals) {
    const file = positionals[0];
    if (!file || positionals.length > 1) throw new UsageError("config check: give exactly one FILE");
    try {
      const rules = loadRulesFile(file);
      process.stdout.write(
        `${file}: ok (${rules.domains.size} domains, ${rules.rules.length} rules, ${rules.policies.size} named policies)\n`,
      );
      return Promise.resolve(0);
    } catch (e) {
      if (!(e instanceof RulesError)) throw e;
      process.stderr.write(`${e.message}\n`);
      return Promise.resolve(1);
    }
  },
};
