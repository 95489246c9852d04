#!/usr/bin/env node
/**
 * The `ratekeeper` command. Every subcommand is ONE entry in {@link COMMANDS}: its words, usage,
 * flags (node:util parseArgs) and a `run` that returns the exit code. `ratekeeper --help` and
 * `ratekeeper <command> --help` are generated from the table.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { HEADER_STYLES, type HeaderStyle } from "ratekeeper/http";
import { loadRulesFile } from "./config/load.js";
import { RulesError } from "./config/rules.js";
import { createLogger } from "./log.js";
import { OverrideCache } from "./overrides/cache.js";
import { openOverrideStore } from "./overrides/open.js";
import { OVERRIDES_COMMANDS } from "./overrides/commands.js";
import { startService, type ServiceOverrides } from "./server.js";

type Flags = NonNullable<ParseArgsConfig["options"]>;
type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** One subcommand. */
export interface Command {
  /** The words that select it, e.g. `["config", "check"]`. */
  readonly words: readonly string[];
  /** Arguments after the words, for help, e.g. `FILE`. */
  readonly args: string;
  readonly summary: string;
  /** Flags, as node:util parseArgs takes them, with a description each for help. */
  readonly flags: Flags;
  readonly flagHelp: Readonly<Record<string, string>>;
  /** Runs it; resolves the exit code (a long-running command resolves when it stops). */
  run(values: Values, positionals: string[]): Promise<number>;
}

class UsageError extends Error {}

function port(text: string | undefined, name: string, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new UsageError(`${name}: must be a port number 0-65535 (got ${JSON.stringify(text)})`);
  return n;
}

function positive(text: string | undefined, name: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${name}: must be a positive whole number (got ${JSON.stringify(text)})`);
  return n;
}

const str = (v: Values[string]): string | undefined => (typeof v === "string" ? v : undefined);

/** The table. Add a subcommand by adding an entry. */
export const COMMANDS: Command[] = [
  {
    words: ["serve"],
    args: "",
    summary: "run the decision service (HTTP API, Envoy rate limit gRPC API, /metrics)",
    flags: {
      config: { type: "string", short: "c" },
      redis: { type: "string" },
      "redis-failure": { type: "string" },
      "redis-timeout": { type: "string" },
      port: { type: "string", short: "p" },
      "grpc-port": { type: "string" },
      host: { type: "string" },
      overrides: { type: "string" },
      "admin-token": { type: "string" },
      headers: { type: "string" },
      "request-timeout": { type: "string" },
      "max-body": { type: "string" },
      "no-watch": { type: "boolean" },
      "no-dashboard": { type: "boolean" },
    },
    flagHelp: {
      config: "FILE  rules file (YAML) [required]",
      redis: "URL  share state in Redis (redis://host:6379); default: in-memory store [env REDIS_URL]",
      "redis-failure":
        "POLICY  when Redis fails or is slow (50 ms): open (admit), closed (deny), insurance (per-process memory store) or throw (503, and /readyz not ready) [default open]",
      "redis-timeout": "MS  the most one Redis call may take before the failure policy decides [default 50]",
      port: "N  HTTP port [env PORT, default 8080]",
      "grpc-port": "N  gRPC port (Envoy RLS) [env GRPC_PORT, default 8081]",
      host: "ADDR  interface to listen on [default 0.0.0.0]",
      overrides: "URL  per-key overrides store: sqlite:./overrides.db or postgres://... [env RATEKEEPER_OVERRIDES]",
      "admin-token": "TOKEN  turn on the admin API (/v1/admin/*) with this bearer token [env RATEKEEPER_ADMIN_TOKEN]",
      headers: "STYLES  limit header styles, comma-separated: ietf, draft-7, draft-6, x-ratelimit [default ietf, as the middleware]",
      "request-timeout": "MS  time a client has to send a whole request; slower ones get 408 [default 10000]",
      "max-body": "BYTES  largest request body; larger ones get 413 [default 65536]",
      "no-watch": "do not reload the rules file when it changes",
      "no-dashboard": "do not serve /dashboard (nor count what it shows)",
    },
    async run(v) {
      const configFile = str(v.config);
      if (!configFile) throw new UsageError("--config: required (the rules file, e.g. examples/rules.yaml)");
      const redisFailure = str(v["redis-failure"]);
      if (redisFailure !== undefined && !["open", "closed", "insurance", "throw"].includes(redisFailure)) {
        throw new UsageError(`--redis-failure: must be open, closed, insurance or throw (got ${JSON.stringify(redisFailure)})`);
      }
      const headerStyles = (str(v.headers) ?? "ietf").split(",").map((x) => x.trim()) as HeaderStyle[];
      for (const h of headerStyles)
        if (!HEADER_STYLES.includes(h))
          throw new UsageError(`--headers: each style must be one of ${HEADER_STYLES.join(", ")} (got ${JSON.stringify(h)})`);
      const logger = createLogger();
      const overridesUrl = str(v.overrides) ?? process.env.RATEKEEPER_OVERRIDES;
      const overrides = overridesUrl ? await openOverrides(overridesUrl, logger) : undefined;
      let running;
      try {
        running = await startService({
          configFile,
          redisUrl: str(v.redis) ?? process.env.REDIS_URL,
          redisFailure: redisFailure as "open" | "closed" | "insurance" | "throw" | undefined,
          port: port(str(v.port) ?? process.env.PORT, "--port", 8080),
          redisTimeoutMs: positive(str(v["redis-timeout"]), "--redis-timeout"),
          grpcPort: port(str(v["grpc-port"]) ?? process.env.GRPC_PORT, "--grpc-port", 8081),
          host: str(v.host),
          watch: v["no-watch"] !== true,
          dashboard: v["no-dashboard"] !== true,
          adminToken: str(v["admin-token"]) ?? process.env.RATEKEEPER_ADMIN_TOKEN,
          overrides,
          headerStyles,
          requestTimeoutMs: positive(str(v["request-timeout"]), "--request-timeout"),
          maxBodyBytes: positive(str(v["max-body"]), "--max-body"),
          logger,
        });
      } catch (e) {
        await overrides?.close();
        throw e;
      }
      const svc = running;
      return new Promise<number>((resolve) => {
        const stop = (signal: string) => {
          logger.info({ signal }, "shutting down");
          svc.close().then(
            () => resolve(0),
            (e: unknown) => {
              logger.error({ err: e }, "shutdown failed");
              resolve(1);
            },
          );
        };
        process.once("SIGTERM", () => stop("SIGTERM"));
        process.once("SIGINT", () => stop("SIGINT"));
      });
    },
  },
  {
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
  },
  // `overrides import|export` (owned by the overrides module).
  ...OVERRIDES_COMMANDS,
];

/**
 * Opens the overrides store named by `--overrides` and its in-memory cache (the hot path's
 * lookup). The overrides module owns both; this only wires them to the service.
 */
async function openOverrides(url: string, logger: ReturnType<typeof createLogger>): Promise<ServiceOverrides> {
  const store = await openOverrideStore(url, {
    onListenerEvent: (e) =>
      e.type === "connected"
        ? logger.info({ backendPid: e.backendPid, reconnects: e.reconnects }, "overrides: LISTEN connection up")
        : logger.warn({ err: e.error?.message, event: e.type }, "overrides: LISTEN connection lost; reconnecting and resyncing"),
  });
  const cache = await OverrideCache.start(store, { onError: (err, during) => logger.warn({ err, during }, "overrides cache") });
  logger.info({ overrides: store.description }, "overrides loaded");
  return {
    lookup: cache,
    store,
    async close() {
      cache.close();
      await store.close();
    },
  };
}

function help(): string {
  const lines = ["usage: ratekeeper <command> [flags]", "", "commands:"];
  for (const c of COMMANDS) lines.push(`  ${[...c.words, c.args].filter(Boolean).join(" ").padEnd(28)} ${c.summary}`);
  lines.push("", "ratekeeper <command> --help shows the command's flags.");
  return lines.join("\n");
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
    process.stderr.write(`ratekeeper: unknown command ${JSON.stringify(argv.slice(0, 2).join(" "))}\n\n${help()}\n`);
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
    if (e instanceof UsageError || e instanceof RulesError || e instanceof RangeError || err.code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`ratekeeper ${command.words.join(" ")}: ${err.message}\n`);
      return 2;
    }
    throw e;
  }
}

// Run when executed (node dist/cli.js, or the `ratekeeper` bin symlink), not when imported.
const self = fileURLToPath(import.meta.url);
if (process.argv[1] && realpathSync(process.argv[1]) === self) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`ratekeeper: ${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
