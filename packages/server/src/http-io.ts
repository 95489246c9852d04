/**
 * The HTTP plumbing every route of the service shares (decision API, admin API, dashboard): one
 * error body, one table from error code to status, JSON in and out, and one bearer-token check.
 *
 * Every answer that is not a success has the body
 * `{"error": "<code>", "message": "<what is wrong, naming the field>"}`, plus `"issues"` (a list of
 * `{path, message}`) when several problems are reported at once.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ConfigIssue } from "ratekeeper";
import { sharedErrorId } from "./service/error-id.js";
import { CheckError, StoreFailure } from "./service/types.js";

/** The error codes, and the one status each is answered with. */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  internal: 500,
  unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

/** The body of every error answer. */
export interface ErrorBody {
  readonly error: ErrorCode;
  readonly message: string;
  readonly issues?: readonly ConfigIssue[];
}

/** An error that is answered as is: its code (hence status), message, issues and extra headers. */
export class HttpError extends Error {
  override readonly name = "HttpError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly issues?: readonly ConfigIssue[],
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** 405 with the `Allow` header. */
export function methodNotAllowed(allow: string): HttpError {
  return new HttpError("method_not_allowed", `use ${allow}`, undefined, { allow });
}

/**
 * The body and status of any error: an {@link HttpError} as it says; a {@link CheckError} (a
 * request that cannot be decided) 400; a {@link StoreFailure} (the store or the overrides
 * database failed) 503, so a client retries rather than gives up; anything else is a bug in the
 * service, not an outage: 500 `internal`, saying so.
 */
export function errorBody(e: unknown): { status: number; body: ErrorBody; headers: Readonly<Record<string, string>> | undefined } {
  if (e instanceof HttpError) {
    const body: ErrorBody = e.issues ? { error: e.code, message: e.message, issues: e.issues } : { error: e.code, message: e.message };
    return { status: e.status, body, headers: e.headers };
  }
  if (e instanceof CheckError) return { status: 400, body: { error: "bad_request", message: e.message }, headers: undefined };
  if (e instanceof StoreFailure) return { status: 503, body: { error: "unavailable", message: e.message }, headers: undefined };
  return { status: 500, body: { error: "internal", message: internalMessage(e) }, headers: undefined };
}

/**
 * What a 500 (or gRPC INTERNAL) says: an unexpected error in the service itself, not the store's,
 * and its {@link errorId}. Never the error's own message: it crosses a trust boundary, and may
 * hold stack details, file paths, connection strings or the keys of other tenants. The log line
 * of the route that failed has the error, with the same id ({@link errorIdField}).
 */
export function internalMessage(e: unknown): string {
  return `internal error (a bug in the service, not a store failure): the service's log has it, error id ${errorId(e)}`;
}

/** The ids given to unexpected errors, by error object. */
const ERROR_IDS = new WeakMap<object, string>();

/**
 * A random id of the unexpected error `e`, the same each time for the same error object, so the
 * answer and the log line name the same id (a thrown primitive gets a new one each time). Errors
 * of the same class and message thrown at the same place share one for a while
 * (service/error-id.ts): the log writes the first in full and counts the others.
 */
export function errorId(e: unknown): string {
  if (e instanceof StoreFailure) return e.errorId;
  if (typeof e !== "object" || e === null) return randomBytes(6).toString("hex");
  let id = ERROR_IDS.get(e);
  if (id === undefined) {
    id = sharedErrorId(internalKind(e));
    ERROR_IDS.set(e, id);
  }
  return id;
}

/**
 * The kind of an unexpected error, for {@link sharedErrorId}: its class, its message and where it
 * was thrown (its stack's frames). Not the message alone: "Cannot read properties of undefined
 * (reading 'length')" is no one bug's, and two bugs sharing an id would have the second's failures
 * counted as the first's, its stack never written. The frames name code, not requests, but for
 * the position V8 gives an async frame of `Promise.all` (`(index 2)`: which descriptor of a check
 * or check of a batch failed), left out: one bug is one kind whichever position hit it.
 */
function internalKind(e: object): string {
  const { constructor: c, message, stack } = e as { constructor?: { name?: unknown }; message?: unknown; stack?: unknown };
  const frames =
    typeof stack === "string" ? stack.split("\n").flatMap((l) => (l.startsWith("    at ") ? [l.replace(/ \(index \d+\)$/, "")] : [])) : [];
  return `internal ${String(c?.name)}: ${String(message).slice(0, 500)}\n${frames.join("\n").slice(0, 2000)}`;
}

/**
 * `{ errorId }` for a log line about an error answered 500 (see {@link internalMessage}) or 503 (a
 * {@link StoreFailure}, whose message gives its id); `{}` for any other.
 */
export function errorIdField(e: unknown): { errorId?: string } {
  return e instanceof HttpError || e instanceof CheckError ? {} : { errorId: errorId(e) };
}

/**
 * Answers an error (see {@link errorBody}). A response already started cannot change its status:
 * its connection is closed instead. An unread request body is drained so the connection can
 * be reused.
 */
export function sendError(req: IncomingMessage, res: ServerResponse, e: unknown): void {
  if (!req.readableEnded) req.resume();
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, body, headers } = errorBody(e);
  sendJson(res, status, body, headers);
}

/** Writes a JSON body (`no-store`: decisions and admin state must not be cached). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Readonly<Record<string, string>>): void {
  const flat = ["cache-control", "no-store"];
  if (headers) {
    for (const k in headers) {
      if (k === "cache-control") flat[1] = headers[k] as string;
      else flat.push(k, headers[k] as string);
    }
  }
  sendJsonText(res, status, JSON.stringify(body), flat);
}

/**
 * Writes JSON already serialised (the decision API renders its results by hand, for speed), with
 * the headers of `flat` (names and values alternating, lower-case names other than
 * `content-type` and `content-length`), which it appends those two to. One `writeHead` of a flat
 * list, then `end`: node walks the list as is. With an object (the headers copied into a new one,
 * two keys added, then walked key by key by node) this function's own time was 10% of a CPU
 * profile of the service under `POST /v1/check` load; with the list, 0.2%. `bytes`, the text's
 * length in UTF-8, is counted when not given.
 */
export function sendJsonText(
  res: ServerResponse,
  status: number,
  text: string,
  flat: (string | number)[] = [],
  bytes: number = Buffer.byteLength(text),
): void {
  flat.push("content-type", "application/json", "content-length", bytes);
  res.writeHead(status, flat);
  res.end(text);
}

/**
 * Reads a JSON body of at most `maxBytes`.
 * @returns the parsed body; undefined for an empty body when `optional`
 * @throws HttpError 413 (with `connection: close`) when larger, 400 when not JSON or empty
 */
export function readJson(req: IncomingMessage, maxBytes: number, optional = false): Promise<unknown> {
  return new Promise((resolve, reject) =>
    readJsonThen(req, maxBytes, optional, (e, body) => (e === undefined ? resolve(body) : reject(e))),
  );
}

/**
 * {@link readJson} with a callback, for the decision route: `done(undefined, body)` or
 * `done(error)`, once. No promise, so `POST /v1/check` answers in the same turn its body ends.
 */
export function readJsonThen(
  req: IncomingMessage,
  maxBytes: number,
  optional: boolean,
  done: (e: Error | undefined, body?: unknown) => void,
): void {
  readTextThen(req, maxBytes, (e, text) => {
    if (e !== undefined) return done(e);
    let body: unknown;
    try {
      body = parseJsonText(text as string, optional);
    } catch (err) {
      return done(err as Error);
    }
    done(undefined, body);
  });
}

/**
 * How far past the cap a body is still read (and thrown away) before its 413 is sent. Answering
 * and closing while the client is still sending makes its next write fail (EPIPE), or a reset
 * discard the answer it had not read yet: `fetch` then rejects with "fetch failed" instead of giving
 * the 413 (a client may send its whole body before it reads; HTTP/1.1 allows it). Nothing read is
 * kept, and the request timeout still applies; past this the answer goes at once, and the
 * connection closes, so a client cannot make the service read without end. (nginx's lingering
 * close, bounded in bytes.)
 */
export const DRAIN_BYTES = 8 * 1024 * 1024;

/**
 * A body of at most `maxBytes`, as UTF-8 text: `done(undefined, text)` or `done(error)` (413,
 * with `connection: close`, when larger), once. A larger body is read to its end and thrown away
 * before the 413, up to {@link DRAIN_BYTES} past the cap; further than that, answered at once.
 */
export function readTextThen(req: IncomingMessage, maxBytes: number, done: (e: Error | undefined, text?: string) => void): void {
  const tooLarge = () =>
    new HttpError("payload_too_large", `body: at most ${maxBytes} bytes (--max-body)`, undefined, { connection: "close" });
  const drainTo = maxBytes + DRAIN_BYTES;
  let size = 0;
  let over = false;
  // node's parser admits only digits here: a value of d digits is below 10^d, so it is converted
  // (a call into V8's runtime) only when it could exceed the cap. The reads below enforce it anyway.
  const length = req.headers["content-length"];
  if (length !== undefined && 10 ** length.length - 1 > maxBytes) {
    const declared = Number(length);
    if (declared > drainTo) return done(tooLarge());
    over = declared > maxBytes;
  }
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let ended = false;
  req.on("data", (c: Buffer) => {
    if (ended) return;
    size += c.length;
    if (size > maxBytes) {
      // Over the cap: nothing more is kept; answered at the end, or now when past the drain.
      first = more = undefined;
      over = true;
      if (size > drainTo) {
        ended = true;
        done(tooLarge());
      }
      return;
    }
    if (over) return;
    // Most bodies come in one chunk: kept as is, with no list.
    if (first === undefined) first = c;
    else (more ??= [first]).push(c);
  });
  req.on("end", () => {
    if (ended) return;
    ended = true;
    if (over) return done(tooLarge());
    done(undefined, more !== undefined ? Buffer.concat(more).toString("utf8") : first === undefined ? "" : first.toString("utf8"));
  });
  req.on("error", (e) => {
    if (ended) return;
    ended = true;
    done(e);
  });
}

/**
 * A body's text as JSON.
 * @returns the parsed body; undefined for an empty body when `optional`
 * @throws HttpError 400 when not JSON, or empty and not `optional`
 */
export function parseJsonText(text: string, optional: boolean): unknown {
  if (text.trim() === "") {
    if (optional) return undefined;
    throw new HttpError("bad_request", "body: required (JSON)");
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new HttpError("bad_request", `body: not valid JSON (${(e as Error).message})`);
  }
}

/** The shortest admin token accepted (16 characters: 96 bits or more from a random generator). */
export const MIN_ADMIN_TOKEN_CHARS = 16;

/**
 * Why `token` cannot be an admin token, or undefined when it can. `Bearer <token>` carries one
 * run of visible ASCII ({@link SCHEME}; node reads header bytes as Latin-1): a token with a
 * space, a newline (an environment variable set from a file) or a non-ASCII character could
 * never be presented, and every request would be a 401.
 */
export function adminTokenProblem(token: string): string | undefined {
  if (token.length < MIN_ADMIN_TOKEN_CHARS) return `at least ${MIN_ADMIN_TOKEN_CHARS} characters (got ${token.length})`;
  const at = token.search(/[^\x21-\x7e]/);
  if (at === -1) return undefined;
  const unit = token.charCodeAt(at).toString(16).toUpperCase().padStart(4, "0");
  return `visible ASCII only, no spaces or line ends (got U+${unit} at index ${at})`;
}

/** `Bearer <token>` (the scheme in any case, RFC 9110 section 11.1) or `Basic base64(user:password)`. */
const SCHEME = /^(bearer|basic)[ \t]+(\S+)[ \t]*$/i;

/**
 * The admin token, checked in constant time: both sides are compared as SHA-256 digests, equal
 * in length, so the comparison leaks neither content nor length.
 */
export class TokenCheck {
  private readonly digest: Buffer;
  /**
   * @param token the admin token
   * @throws Error when it is shorter than {@link MIN_ADMIN_TOKEN_CHARS} or not visible ASCII ({@link adminTokenProblem})
   */
  constructor(token: string) {
    const problem = adminTokenProblem(token);
    if (problem !== undefined) throw new Error(`adminToken: ${problem}`);
    this.digest = sha256(token);
  }

  /**
   * Whether an `Authorization` header carries the token: `Bearer <token>`, or with `basic`
   * (for browsers, which ask for a user and password) `Basic` with the token as the password.
   */
  matches(authorization: string | undefined, basic = false): boolean {
    const m = SCHEME.exec(authorization ?? "");
    let presented = "";
    let ok = m !== null;
    if (m !== null && (m[1] as string).toLowerCase() === "basic") {
      const decoded = Buffer.from(m[2] as string, "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      ok = basic && colon >= 0;
      presented = colon >= 0 ? decoded.slice(colon + 1) : "";
    } else if (m !== null) presented = m[2] as string;
    // Compared even when the header was malformed, so timing does not tell the cases apart.
    return timingSafeEqual(sha256(presented), this.digest) && ok;
  }
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s, "utf8").digest();
}
