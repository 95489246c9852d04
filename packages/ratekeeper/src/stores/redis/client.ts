import { describeValue, RateLimitConfigError } from "../../core/errors.js";
import { foreignValueError } from "./foreign-value.js";
import { ioredisShim, type IoRedisLike } from "./ioredis.js";
import { nodeRedisShim, type NodeRedisLike } from "./node-redis.js";

export type { IoRedisLike } from "./ioredis.js";
export type { NodeRedisLike } from "./node-redis.js";

/**
 * A Redis client the store accepts: an ioredis `Redis` or `Cluster`, or a node-redis (`redis`
 * package) client or cluster. Both libraries are optional peers: the store only calls the few
 * methods named here, found by shape at runtime, and never imports either library.
 */
export type RedisClientLike = IoRedisLike | NodeRedisLike;

/** The three commands the store sends, whatever the client library. */
export interface RedisShim {
  /** `EVALSHA sha numkeys keys... args...` */
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  /** `EVAL script numkeys keys... args...` */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /**
   * EVALSHA / EVAL with bulk-string replies as raw bytes (Buffers), for scripts that reply with a
   * key's binary value. Absent when the client library cannot (the store then asks for integers).
   */
  evalshaBuffer?: (sha: string, keys: string[], args: string[]) => Promise<unknown>;
  evalBuffer?: (script: string, keys: string[], args: string[]) => Promise<unknown>;
  /** `DEL keys...` (one slot: the keys share a hash tag). */
  del(keys: string[]): Promise<unknown>;
  /** A Redis Cluster client (then a call may only touch one hash slot). */
  readonly isCluster: boolean;
  /**
   * Whether the client knows that its connection was lost (it is reconnecting or closed). Never
   * true before the first connection: commands sent while connecting wait for it, as usual.
   */
  lost(): boolean;
}

/**
 * Picks the shim by shape: node-redis names the command `evalSha`, ioredis `evalsha`.
 * @throws RateLimitConfigError naming `client` when it is neither
 */
export function shimFor(client: unknown): RedisShim {
  const c = client as Record<string, unknown> | null;
  if (c !== null && typeof c === "object") {
    if (typeof c.evalSha === "function") return nodeRedisShim(client as NodeRedisLike);
    if (typeof c.evalsha === "function") return ioredisShim(client as IoRedisLike);
  }
  throw new RateLimitConfigError([
    {
      path: "client",
      message: `must be an ioredis Redis or Cluster, or a node-redis client or cluster (got ${describeValue(client)})`,
    },
  ]);
}

/** Error codes that say Redis cannot serve now (or not this call on this node), wherever they appear in a message. */
const CANNOT_SERVE =
  /\b(OOM|BUSY|LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|MISCONF|NOREPLICAS|NOPERM|NOAUTH|WRONGPASS|MOVED|ASK|CROSSSLOT|NOSCRIPT)\b/;

/**
 * What Redis says, with no code word, when it refuses a script's call for a reason that is not
 * the value: an ACL ("The user executing the script can't run this command or subcommand"), a
 * SCRIPT KILL, a cluster down or resharding ("... while the cluster is down", "non local key").
 * Redis 7 gives them as "ERR <text> script: <sha>, on @user_script:N." (seen on 7.0.15), Redis 6
 * inside "Error running script": they look like a script failing on a value, but hold every key.
 */
const SCRIPT_REFUSED = /The user executing the script|Script killed|cluster is down|non local key/;

/**
 * Whether a Redis error is about one key's value, not about Redis: WRONGTYPE (another program's
 * list or hash under a key name of ours), or the script failing on a value it did not write
 * ("ERR user_script:421: bad argument #2 to 'unpack'", "ERR value is not an integer ... on
 * @user_script:391"). Redis ran the call, so it serves: the breaker must not count it, and only
 * that decision fails. An error that says Redis cannot serve (OOM, READONLY, BUSY...) is never
 * one, even inside a script's error (Redis 6 writes "ERR Error running script ...: -OOM ..."), nor
 * is a script refused by an ACL, a kill or the cluster (SCRIPT_REFUSED). No key name is in these
 * texts (our scripts' errors never quote KEYS), so a client cannot steer the verdict by its key.
 */
export function isKeyValueError(err: unknown): boolean {
  const msg = err instanceof Error ? err.message : String(err);
  if (CANNOT_SERVE.test(msg) || SCRIPT_REFUSED.test(msg)) return false;
  return msg.startsWith("WRONGTYPE") || (msg.startsWith("ERR ") && msg.includes("user_script"));
}

/**
 * `e`, or, when it is Redis's error on one key's value (isKeyValueError: a decision made alone,
 * its call failing), the same error naming `keys` (the decision's keys) and what to do.
 */
export function namingKeys(e: unknown, keys: readonly string[]): unknown {
  if (!isKeyValueError(e)) return e;
  const what = e instanceof Error ? e.message : String(e);
  return foreignValueError(`${keys.length === 1 ? keys[0] : `one of ${keys.join(", ")}`}: ${what}`);
}

/** Whether a Redis error says the script is not in the server's script cache. */
export function isNoScript(err: unknown): boolean {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.startsWith("NOSCRIPT") || msg.includes(" NOSCRIPT ") || msg.includes("NOSCRIPT No matching script");
}
