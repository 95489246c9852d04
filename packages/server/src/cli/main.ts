/**
 * The `ratekeeper` command line. Every subcommand is ONE entry in {@link COMMANDS} (each in its own
 * module in this folder); `ratekeeper --help` and `ratekeeper <command> --help` are generated from
 * the table.
 */
import { parseArgs } from "node:util";
import { RateLimitConfigError } from "ratekeeper";
import { RulesError } from "../config/rules.js";
import { OverrideStoreOpenError } from "../overrides/open.js";
import { UsageError, type Command } from "./command.js";
import { CONFIG_CHECK_COMMAND } from "./config.js";
import { OVERRIDES_COMMANDS } from "./overrides.js";
import { SERVE_COMMAND } from "./serve.js";
import { SIMULATE_COMMAND } from "./simulate.js";

export type { Command } from "./command.js";

/** The table. Add a subcommand by adding an entry. */
export const COMMANDS: Command[] = [SERVE_COMMAND, CONFIG_CHECK_COMMAND, ...OVERRIDES_COMMANDS, SIMULATE_COMMAND];

/**
 * The command list: every command, or those of one group (`overrides`: the commands whose first
 * word it is), so that `ratekeeper overrides --help` shows what may follow it.
 */
function help(group?: string): string {
  const name = group ? `ratekeeper ${group} <command>` : "ratekeeper <command>";
  const lines = [`usage: ${name} [flags]`, "", "commands:"];
  for (const c of COMMANDS.filter((c) => group === undefined || c.words[0] === group))
    lines.push(`  ${[...c.words, c.args].filter(Boolean).join(" ").padEnd(28)} ${c.summary}`);
  lines.push("", `${name} --help shows the command's flags.`);
  return lines.join("\n");
}

/** The first word of commands of several words (`config`, `overrides`), when `argv[0]` is one. */
function groupOf(argv: string[]): string | undefined {
  const word = argv[0];
  return COMMANDS.some((c) => c.words.length > 1 && c.words[0] === word) ? word : undefined;
}

function commandHelp(c: Command): string {
  const lines = [
    `usage: ratekeeper ${[...c.words, c.args].filter(Boolean).join(" ")}${Object.keys(c.flags).length ? " [flags]" : ""}`,
    "",
    c.summary,
  ];
  if (Object.keys(c.flags).length) {
    lines.push("", "flags:");
    for (const [name, f] of Object.entries(c.flags)) {
      const [arg, ...rest] = (c.flagHelp[name] ?? "").split("  ");
      const text = rest.length ? `--${name} ${arg}` : `--${name}`;
      lines.push(`  ${`${f.short ? `-${f.short}, ` : "    "}${text}`.padEnd(34)} ${rest.length ? rest.join("  ") : arg}`);
    }
  }
  return lines.join("\n");
}

/**
 * Runs the CLI with `argv` (without `node` and the script).
 * @returns the exit code
 * @example await main(["config", "check", "examples/rules.yaml"]) // 0
 */
export async function main(argv: string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === "--help" || argv[0] === "-h" || argv[0] === "help") {
    process.stdout.write(`${help()}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  // The longest run of leading words that names a command.
  const command = COMMANDS.filter((c) => c.words.every((w, i) => argv[i] === w)).sort((a, b) => b.words.length - a.words.length)[0];
  if (!command) {
    const group = groupOf(argv);
    const next = argv[1];
    if (group && (next === "--help" || next === "-h")) {
      process.stdout.write(`${help(group)}\n`);
      return 0;
    }
    if (group && next === undefined) {
      process.stderr.write(`ratekeeper ${group}: name a command\n\n${help(group)}\n`);
      return 2;
    }
    process.stderr.write(`ratekeeper: unknown command ${JSON.stringify(argv.slice(0, 2).join(" "))}\n\n${help(group)}\n`);
    return 2;
  }
  const rest = argv.slice(command.words.length);
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(`${commandHelp(command)}\n`);
    return 0;
  }
  try {
    const { values, positionals } = parseArgs({ args: rest, options: command.flags, allowPositionals: true, strict: true });
    if (positionals.length > 0 && !command.args) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
    return await command.run(values, positionals);
  } catch (e) {
    const err = e as Error & { code?: string };
    if (
      e instanceof UsageError ||
      e instanceof RulesError ||
      e instanceof RateLimitConfigError ||
      e instanceof RangeError ||
      err.code?.startsWith("ERR_PARSE_ARGS")
    ) {
      process.stderr.write(`ratekeeper ${command.words.join(" ")}: ${err.message}\n`);
      return 2;
    }
    // Not a usage error but nothing the code got wrong either: said in one line, exit 1.
    if (e instanceof OverrideStoreOpenError) {
      process.stderr.write(`ratekeeper ${command.words.join(" ")}: ${err.message}\n`);
      return 1;
    }
    throw e;
  }
}
