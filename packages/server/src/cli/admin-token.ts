/**
 * Where `ratekeeper serve` takes the admin token from, and the checks it must pass. A token on
 * the command line is readable by every local user (`ps`, /proc/<pid>/cmdline), so a file
 * (`--admin-token-file`, as Kubernetes mounts a secret) or the environment is preferred.
 */
import { statSync } from "node:fs";
import { readSecretFile } from "./read-secret.js";
import { adminTokenProblem } from "../http-io.js";
import { UsageError, str, type Values } from "./command.js";

/** The token, and a warning to log when it came from the command line. */
export interface AdminTokenChoice {
  readonly token: string | undefined;
  readonly warning: string | undefined;
}

/**
 * Reads the token from `--admin-token-file`, `--admin-token` (one of them), or else
 * RATEKEEPER_ADMIN_TOKEN; checks its length, and that its file is not readable by other users.
 * @throws UsageError naming the source and what to do
 */
export function chooseAdminToken(v: Values, env: NodeJS.ProcessEnv): AdminTokenChoice {
  const flag = str(v["admin-token"]);
  const file = str(v["admin-token-file"]);
  if (flag !== undefined && file !== undefined) throw new UsageError("--admin-token, --admin-token-file: give one of them, not both");
  if (file !== undefined) return { token: checked(readTokenFile(file), "--admin-token-file"), warning: undefined };
  if (flag !== undefined)
    return {
      token: checked(flag, "--admin-token"),
      warning:
        "the admin token given with --admin-token is readable by every local user (ps); use --admin-token-file or RATEKEEPER_ADMIN_TOKEN",
    };
  const fromEnv = env.RATEKEEPER_ADMIN_TOKEN;
  return { token: fromEnv ? checked(fromEnv, "RATEKEEPER_ADMIN_TOKEN") : undefined, warning: undefined };
}

function checked(token: string, source: string): string {
  const problem = adminTokenProblem(token);
  if (problem !== undefined) throw new UsageError(`${source}: ${problem}; generate one with: openssl rand -base64 32`);
  return token;
}

/** The file's content without surrounding whitespace (a trailing newline from `echo` or an editor). */
function readTokenFile(file: string): string {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (e) {
    throw new UsageError(`--admin-token-file: cannot read ${file} (${(e as Error).message})`);
  }
  // As PostgreSQL does for its key files: other users must not be able to read (or write) it.
  // Checked before reading: a pipe is read with a bounded wait (read-secret.ts).
  if ((mode & 0o006) !== 0)
    throw new UsageError(
      `--admin-token-file: ${file} is readable by other users (mode ${(mode & 0o777).toString(8)}); chmod 600 it (on a Kubernetes secret volume: defaultMode 0400)`,
    );
  try {
    return readSecretFile(file).trim();
  } catch (e) {
    throw new UsageError(`--admin-token-file: cannot read ${file} (${(e as Error).message})`);
  }
}
