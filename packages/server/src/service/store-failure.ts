/**
 * What a client is told of a store's failure (a 503 body, gRPC UNAVAILABLE details, the
 * dashboard): the kind of failure and which store, in words of the service's own, never the
 * error's text. A store's error crosses a trust boundary: Node's connect error names the Redis
 * address (`connect ECONNREFUSED 10.0.0.5:6379`), a PostgreSQL error its host, user and database,
 * a SQLite error the file's path, and a RedisStore error the state key, another tenant's. Only
 * codes of a closed vocabulary (an errno name, a SQLite result code, a SQLSTATE, a Redis error's
 * code word) are named. The service's log line has the error itself, with the same error id.
 */
import { MemoryStore, type Store } from "ratekeeper";
import { RedisStore } from "ratekeeper/redis";
import { DatabaseFileGoneError } from "../overrides/sqlite-files.js";
import { sharedErrorId } from "./error-id.js";

/** Codes of Node (and undici) that say the store could not be reached. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "ENOENT",
  "EACCES",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);
const TIMEOUT_CODES = new Set([
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * The fixed texts of clients that say there is no connection (ioredis with no offline queue, pg
 * after a connection error) or that it timed out (pg, pg-pool), and names of clients' errors
 * (node-redis: ClientClosedError, ClientOfflineError, SocketClosedUnexpectedlyError,
 * ConnectionTimeoutError). Only read to tell the kind; never repeated.
 */
const NOT_CONNECTED =
  /^(Stream isn't writeable|Connection is closed|Connection terminated|Client has encountered a connection error|Client was closed)/;
const TIMED_OUT = /^(Connection terminated due to connection timeout|timeout exceeded when trying to connect|Query read timeout)/;

type Kind = "is unavailable" | "timed out" | "refused the call" | "threw";

/** The kind of failure `e` is, and a code of a closed vocabulary naming it when there is one. */
export function failureKind(e: unknown): { kind: Kind; code?: string } {
  let name: string | undefined;
  let x: unknown = e;
  for (let depth = 0; depth < 8 && typeof x === "object" && x !== null; depth++, x = (x as { cause?: unknown }).cause) {
    const err = x as { name?: unknown; code?: unknown; severity?: unknown; message?: unknown; constructor?: { name?: unknown } };
    const cls = typeof err.constructor?.name === "string" ? err.constructor.name : "";
    const code = typeof err.code === "string" ? err.code : "";
    if (err.name === "RedisDownError") return { kind: "is unavailable", code: "circuit breaker open" };
    if (err.name === "RedisTimeoutError" || cls === "HttpRedisTimeoutError" || TIMEOUT_CODES.has(code)) {
      return TIMEOUT_CODES.has(code) ? { kind: "timed out", code } : { kind: "timed out" };
    }
    if (UNREACHABLE.has(code)) return { kind: "is unavailable", code };
    const text = typeof err.message === "string" ? err.message : "";
    if (TIMED_OUT.test(text) || /Timeout/.test(cls)) return { kind: "timed out" };
    if (NOT_CONNECTED.test(text) || /Closed|Offline/.test(cls)) return { kind: "is unavailable", code: "not connected" };
    if (/^SQLITE_[A-Z_]{2,40}$/.test(code)) return { kind: "refused the call", code };
    if (typeof err.severity === "string" && /^[0-9A-Z]{5}$/.test(code)) return { kind: "refused the call", code: `SQLSTATE ${code}` };
    if (cls === "ForeignValueError") return { kind: "refused the call", code: "a key holds a value of another layout or program" };
    // Its advice, one of three fixed texts naming no path: the admin writing overrides learns what to do.
    if (x instanceof DatabaseFileGoneError) return { kind: "refused the call", code: x.advice };
    const word = /^([A-Z]{2,20})\b/.exec(text)?.[1];
    if ((err.name === "ReplyError" || err.name === "ErrorReply") && word !== undefined) return { kind: "refused the call", code: word };
    if (typeof err.name === "string" && /^[A-Za-z][A-Za-z0-9_]{0,40}$/.test(err.name)) name = err.name;
  }
  return { kind: "threw", code: name ?? "an error" };
}

/** What the service's stores are called in a message: `kind` of an overrides store, or a limiter store. */
export type FailedSource = Store | { readonly kind: "sqlite" | "postgres" } | undefined;

/** The store's name, and its failure policy when that is why the call failed (`"throw"`). */
function subject(source: FailedSource): { who: string; policy: string } {
  if (source === undefined) return { who: "the store", policy: "" };
  if ("kind" in source) return { who: source.kind === "postgres" ? "PostgreSQL" : "SQLite", policy: "" };
  if (source instanceof MemoryStore) return { who: "the memory store", policy: "" };
  if (source instanceof RedisStore) {
    return {
      who: "Redis",
      policy: source.failure === "throw" ? '; the failure policy is "throw" (--redis-failure): no decision was made' : "",
    };
  }
  return { who: "the store", policy: "" };
}

/**
 * The message of a store's failure: `the <what> failed: <store> <kind> (<code>)[; the failure
 * policy ...]; the service's log has the error, error id <id>`, e.g. `the store failed: Redis is
 * unavailable (ECONNREFUSED); ...`, `the store failed: the memory store threw RangeError; ...`.
 * The id is shared by the failures whose message is otherwise the same for a while
 * (error-id.ts): the log writes the first in full and counts the others.
 */
export function failureMessage(what: string, cause: unknown, source: FailedSource): { message: string; id: string } {
  const { kind, code } = failureKind(cause);
  const { who, policy } = subject(source);
  const how = kind === "threw" ? `threw ${code}` : code === undefined ? kind : `${kind} (${code})`;
  const text = `the ${what} failed: ${who} ${how}${policy}`;
  const id = sharedErrorId(text);
  return { message: `${text}; the service's log has the error, error id ${id}`, id };
}
