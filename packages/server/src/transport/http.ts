import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createHash, timingSafeEqual } from "node:crypto";
import type { DescriptorEntry } from "../config/match.js";
import type { Dashboard } from "../dashboard/routes.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { HeaderStyle } from "ratekeeper/http";
import type { DecisionService } from "../service/decide.js";
import { CheckError, type CheckInput, type CheckResult } from "../service/types.js";
import { parseDescriptorKey } from "../service/descriptor-key.js";
import { createAdminHandler } from "./admin.js";
import { DEFAULT_STYLES, limitHeaders, resultJson } from "./render.js";

/** Options of {@link createHttpServer}. */
export interface HttpOptions {
  service: DecisionService;
  metrics: Metrics;
  logger: Logger;
  /** Whether the service may take traffic: rules loaded and the store reachable (or a failure policy set). */
  readiness: () => { ready: boolean; reason?: string | undefined };
  /** Largest request body, in bytes; larger ones get 413. @default 65536 */
  maxBodyBytes?: number | undefined;
  /** Whole-request timeout for slow clients (`server.requestTimeout`). @default 10000 */
  requestTimeoutMs?: number | undefined;
  /** Time allowed to send the headers (`server.headersTimeout`). @default 5000 */
  headersTimeoutMs?: number | undefined;
  /** Limit header styles, as the middleware's `headers` option. @default ["ietf"] */
  headerStyles?: readonly HeaderStyle[] | undefined;
  /** Admin API token; without it `/v1/admin/*` is 404. */
  adminToken?: string | undefined;
  /** Passed to the admin handler as `ctx.overrides`. */
  overridesStore?: unknown;
  /** Answers `/dashboard` and everything under it (it checks the admin token itself); without it they are 404. */
  dashboard?: Dashboard | undefined;
}

/** `X-RateLimit-Descriptor-1` ... `-9`: further descriptors for `/v1/auth`, in order. */
const NUMBERED_DESCRIPTOR_HEADERS = Array.from({ length: 9 }, (_, i) => `x-ratelimit-descriptor-${i + 1}`);

/** The `/v1/auth` deny status. nginx's auth_request accepts only 2xx, 401 and 403 from the subrequest. */
const DENY_STATUSES = new Set([429, 403, 401]);

/**
 * The HTTP API on node:http (no framework: a check is a few microseconds of work, so framework
 * overhead would dominate). Routes:
 * - `POST /v1/check`: one check (`{domain, descriptors, cost}` or `{key, policy, cost}`), or a
 *   batch (`{checks: [...]}` or a JSON array). 200 with the decision and limit headers.
 * - `GET /v1/keys/<domain>/<descriptor key>` (or `...?policy=<name>` for a plain key): peek.
 * - `GET /v1/auth`: for nginx `auth_request`; 204 or 429 (or `deny_status`) with headers.
 * - `GET /v1/rules`: the rules in force. `/healthz`, `/readyz`, `/metrics`. `/v1/admin/*`: see {@link AdminContext}.
 * - `/dashboard`: the live dashboard and its JSON (`/dashboard/api/state`, `/dashboard/api/events`).
 * @example const server = await createHttpServer({ service, metrics, logger, readiness: () => ({ ready: true }) });
 */
export function createHttpServer(options: HttpOptions): Promise<Server> {
  const { service, metrics, logger } = options;
  const maxBody = options.maxBodyBytes ?? 65_536;
  const styles = options.headerStyles ?? DEFAULT_STYLES;
  const token = options.adminToken;
  // The admin API (/v1/admin/*) is on only with a token; this file checks the token before handing a request over.
  const admin = token
    ? createAdminHandler({
        overrides: options.overridesStore,
        limiters: { peek: (i) => service.peek(i), reset: (i) => service.reset(i) },
        logger,
      })
    : undefined;
  // Compared as SHA-256 digests: equal lengths always, so timingSafeEqual leaks neither content nor length.
  const tokenBuf = token ? createHash("sha256").update(token).digest() : undefined;

  const requestTimeout = options.requestTimeoutMs ?? 10_000;
  const server = createServer(
    {
      requestTimeout,
      headersTimeout: options.headersTimeoutMs ?? Math.min(5_000, requestTimeout),
      keepAliveTimeout: 5_000,
      // How often node looks for requests past their timeouts (default 30 s: too lax for slow-client floods).
      connectionsCheckingInterval: Math.min(1_000, requestTimeout),
    },
    (req, res) => {
      handle(req, res).catch((e: unknown) => {
        if (e instanceof CheckError) return send(res, 400, { error: e.message });
        logger.error({ err: e, url: req.url }, "request failed");
        if (!res.headersSent) send(res, 503, { error: `the store failed: ${(e as Error).message}` });
        else res.destroy();
      });
    },
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    const method = req.method;
    if (url === "/v1/check" || (url.startsWith("/v1/check") && url.charCodeAt(9) === 63) /* "?" */) {
      if (method !== "POST") return send(res, 405, { error: "use POST" }, { allow: "POST" });
      const body = await readJson(req, res, maxBody);
      if (body === undefined) return;
      return check(body, res);
    }
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    const query = new Query(q === -1 ? "" : url.slice(q + 1));
    if (path === "/v1/auth") {
      // A check charges the limit: only what nginx's auth_request sends (GET), and HEAD.
      if (method !== "GET" && method !== "HEAD") return send(res, 405, { error: "use GET (or HEAD)" }, { allow: "GET, HEAD" });
      return auth(req, res, query);
    }
    if (path.startsWith("/v1/keys/")) {
      if (method !== "GET") return send(res, 405, { error: "use GET" }, { allow: "GET" });
      return keys(path.slice("/v1/keys/".length), query, res);
    }
    if (path === "/healthz") return send(res, 200, { status: "ok" });
    if (path === "/readyz") {
      const r = options.readiness();
      return send(res, r.ready ? 200 : 503, r.ready ? { status: "ready" } : { status: "not ready", reason: r.reason ?? "unknown" });
    }
    if (path === "/metrics") {
      const text = await metrics.registry.metrics();
      res.writeHead(200, { "content-type": metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (path === "/v1/rules") {
      const rules = service.rules;
      return send(res, 200, {
        source: rules.source,
        domains: [...rules.domains.keys()],
        policies: Object.fromEntries([...rules.policies.values()].map((p) => [p.name, p.specs])),
        rules: rules.rules.map((r) => ({
          id: r.id,
          path: r.path,
          unlimited: r.unlimited,
          shadow: r.shadow,
          cost: r.cost,
          limits: r.specs,
        })),
      });
    }
    if (path === "/dashboard" || path.startsWith("/dashboard/")) {
      if (!options.dashboard) return send(res, 404, { error: "the dashboard is off (started with --no-dashboard)" });
      return options.dashboard.handle(req, res, path);
    }
    if (path.startsWith("/v1/admin/") || path === "/v1/admin") {
      if (!admin || !tokenBuf)
        return send(res, 404, { error: "the admin API is off (start with --admin-token or RATEKEEPER_ADMIN_TOKEN)" });
      // RFC 9110 section 11.1: the scheme is case-insensitive ("bearer" is "Bearer").
      const m = BEARER.exec(req.headers.authorization ?? "");
      const auth = createHash("sha256")
        .update(m?.[1] ?? "")
        .digest();
      // Compared even when the header was malformed, so timing does not tell the two apart.
      if (!timingSafeEqual(auth, tokenBuf) || m === null)
        return send(res, 401, { error: "admin API: needs Authorization: Bearer <admin token>" }, { "www-authenticate": "Bearer" });
      if (await admin(req, res)) return;
      return send(res, 404, { error: `no admin route ${method ?? ""} ${path}` });
    }
    return send(res, 404, { error: `no route ${method ?? ""} ${path}` });
  }

  async function check(body: unknown, res: ServerResponse): Promise<void> {
    const batch = Array.isArray(body) ? body : isObject(body) && Array.isArray(body.checks) ? (body.checks as unknown[]) : undefined;
    if (batch === undefined) {
      const input = toInput(body, "");
      const result = await service.decide(input);
      return sendJsonText(res, 200, resultJson(result), limitHeaders(result.statuses, styles));
    }
    if (batch.length === 0 || batch.length > 1000) throw new CheckError("checks: must hold 1-1000 checks");
    const results = await Promise.all(
      batch.map(async (b, i) => {
        try {
          return await service.decide(toInput(b, `checks[${i}].`));
        } catch (e) {
          if (e instanceof CheckError) return { error: e.message };
          throw e;
        }
      }),
    );
    let text = '{"results":[';
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as CheckResult | { error: string };
      text += (i === 0 ? "" : ",") + ("error" in r ? JSON.stringify(r) : resultJson(r));
    }
    return sendJsonText(res, 200, `${text}]}`);
  }

  async function keys(rest: string, query: Query, res: ServerResponse): Promise<void> {
    const slash = rest.indexOf("/");
    if (slash <= 0 || slash === rest.length - 1)
      throw new CheckError("path: use /v1/keys/<domain>/<descriptor key, e.g. user_id=42> or /v1/keys/<domain>/<key>?policy=<name>");
    let domain: string;
    let key: string;
    try {
      domain = decodeURIComponent(rest.slice(0, slash));
      key = decodeURIComponent(rest.slice(slash + 1));
    } catch {
      throw new CheckError("path: bad percent-encoding");
    }
    const policy = query.get("policy");
    let input: CheckInput;
    if (policy !== null) input = { domain, key, policy };
    else {
      const entries = parseDescriptorKey(key);
      if (!entries)
        throw new CheckError(
          `path: ${JSON.stringify(key)} is not a descriptor key (key=value, several joined by |); for a plain key add ?policy=<name>`,
        );
      input = { domain, descriptors: [entries] };
    }
    const result = await service.peek(input);
    return sendJsonText(res, 200, resultJson(result), limitHeaders(result.statuses, styles));
  }

  async function auth(req: IncomingMessage, res: ServerResponse, query: Query): Promise<void> {
    const h = req.headers;
    const deny = Number(query.get("deny_status") ?? h["x-ratelimit-deny-status"] ?? 429);
    if (!DENY_STATUSES.has(deny)) throw new CheckError("deny_status: must be 429, 403 or 401");
    const domain = query.get("domain") ?? header(h["x-ratelimit-domain"]);
    const costText = query.get("cost") ?? header(h["x-ratelimit-cost"]);
    const cost = costText === undefined ? undefined : parseCost(costText);
    const key = query.get("key") ?? header(h["x-ratelimit-key"]);
    let input: CheckInput;
    if (key !== undefined) {
      input = { domain: domain ?? undefined, key, policy: query.get("policy") ?? header(h["x-ratelimit-policy"]), cost };
    } else {
      const texts = query.getAll("d");
      const one = header(h["x-ratelimit-descriptor"]);
      if (one !== undefined) texts.push(one);
      for (const name of NUMBERED_DESCRIPTOR_HEADERS) {
        const t = header(h[name]);
        if (t !== undefined) texts.push(t);
      }
      if (texts.length === 0)
        throw new CheckError("descriptors: give ?d=key=value|key=value or X-RateLimit-Descriptor headers (or a key and a policy)");
      const descriptors = texts.map((t, i) => {
        const entries = parseDescriptorKey(t);
        if (!entries) throw new CheckError(`descriptor ${i}: ${JSON.stringify(t)} must be key=value, several joined by |`);
        return entries;
      });
      input = { domain: domain ?? undefined, descriptors, cost };
    }
    const result = await service.decide(input);
    const headers = limitHeaders(result.statuses, styles);
    res.writeHead(result.allowed ? 204 : deny, headers);
    res.end();
  }

  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    // Bad HTTP, or a slow client past headersTimeout/requestTimeout: answer and close.
    if (!socket.writable) return void socket.destroy(err);
    const status =
      err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? "408 Request Timeout"
        : err.code === "HPE_HEADER_OVERFLOW"
          ? "431 Request Header Fields Too Large"
          : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  });
  return Promise.resolve(server);
}

/**
 * A query string, parsed once into a small map (URLSearchParams and its unescaping were a few
 * percent of a /v1/auth CPU profile; most queries here have nothing to decode). Same decoding (`+` is a space, then percent-decoding); a
 * malformed escape is a 400.
 */
class Query {
  /** Names and values, alternating: a handful of parameters is faster to scan than to hash. */
  private readonly pairs: string[] = [];
  constructor(text: string) {
    if (text.length === 0) return;
    let from = 0;
    while (from <= text.length) {
      let to = text.indexOf("&", from);
      if (to === -1) to = text.length;
      if (to > from) {
        const eq = text.indexOf("=", from);
        if (eq === -1 || eq > to) this.pairs.push(decode(text.slice(from, to)), "");
        else this.pairs.push(decode(text.slice(from, eq)), decode(text.slice(eq + 1, to)));
      }
      from = to + 1;
    }
  }
  get(name: string): string | null {
    const p = this.pairs;
    for (let i = 0; i < p.length; i += 2) if (p[i] === name) return p[i + 1] as string;
    return null;
  }
  getAll(name: string): string[] {
    const out: string[] = [];
    const p = this.pairs;
    for (let i = 0; i < p.length; i += 2) if (p[i] === name) out.push(p[i + 1] as string);
    return out;
  }
}

function decode(s: string): string {
  const plus = s.indexOf("+") !== -1;
  if (!plus && s.indexOf("%") === -1) return s;
  try {
    return decodeURIComponent(plus ? s.replace(/\+/g, " ") : s);
  } catch {
    throw new CheckError(`query: bad percent-encoding in ${JSON.stringify(s)}`);
  }
}

/** `Authorization: Bearer <token>`, the scheme in any case, then the token (RFC 6750 token68). */
const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * A cost sent as text (`?cost=` or `X-RateLimit-Cost`): decimal digits only. `Number()` would
 * take "0x10" as 16, "1e2" as 100 and "" as 0, and turn "abc" into NaN (which JSON shows as null).
 */
function parseCost(text: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(text))
    throw new CheckError(`cost: must be a positive whole number in decimal digits, such as cost=2 (got ${JSON.stringify(text)})`);
  return Number(text);
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads a JSON body up to `max` bytes. Answers 413 (and closes) when larger, 400 when not JSON.
 * @returns the parsed body, or undefined when it already answered
 */
function readJson(req: IncomingMessage, res: ServerResponse, max: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (declared > max) {
    send(res, 413, { error: `body: larger than ${max} bytes` }, { connection: "close" });
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on("data", (c: Buffer) => {
      if (done) return;
      size += c.length;
      if (size > max) {
        done = true;
        send(res, 413, { error: `body: larger than ${max} bytes` }, { connection: "close" });
        req.resume();
        resolve(undefined);
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (done) return;
      done = true;
      const text = chunks.length === 1 ? (chunks[0] as Buffer).toString("utf8") : Buffer.concat(chunks).toString("utf8");
      try {
        resolve(JSON.parse(text));
      } catch (e) {
        reject(new CheckError(`body: not valid JSON (${(e as Error).message})`));
      }
    });
    req.on("error", (e) => {
      if (!done) {
        done = true;
        reject(e);
      }
    });
  });
}

const INPUT_KEYS = new Set(["domain", "descriptors", "key", "policy", "cost"]);

/**
 * Validates one check's JSON. Descriptors are either lists of `{key, value}` entries (Envoy's
 * shape) or objects whose properties are the entries in order (`{"remote_address": "1.2.3.4", "path": "/api"}`).
 */
function toInput(body: unknown, at: string): CheckInput {
  if (!isObject(body)) throw new CheckError(`${at || "body"}: must be a JSON object (or a batch: {"checks": [...]})`);
  for (const k of Object.keys(body))
    if (!INPUT_KEYS.has(k)) throw new CheckError(`${at}${k}: unknown field (known: ${[...INPUT_KEYS].join(", ")}, or checks for a batch)`);
  const { domain, descriptors, key, policy, cost } = body;
  if (domain !== undefined && (typeof domain !== "string" || domain.length === 0))
    throw new CheckError(`${at}domain: must be a non-empty string`);
  // The cost is passed on as sent: the decision service checks it (one place for every transport).
  if (key !== undefined) {
    if (typeof key !== "string") throw new CheckError(`${at}key: must be a string`);
    if (descriptors !== undefined) throw new CheckError(`${at}: give descriptors or a key, not both`);
    if (typeof policy !== "string") throw new CheckError(`${at}policy: a plain key needs the name of a policy`);
    return { domain, key, policy, cost: cost as number | undefined };
  }
  if (typeof domain !== "string") throw new CheckError(`${at}domain: required with descriptors`);
  if (!Array.isArray(descriptors) || descriptors.length === 0 || descriptors.length > 64)
    throw new CheckError(`${at}descriptors: must be a list of 1-64 descriptors`);
  const out: DescriptorEntry[][] = [];
  for (let i = 0; i < descriptors.length; i++) {
    const d: unknown = descriptors[i];
    const p = `${at}descriptors[${i}]`;
    const entries: DescriptorEntry[] = [];
    if (Array.isArray(d)) {
      for (let j = 0; j < d.length; j++) {
        const e: unknown = d[j];
        if (!isObject(e) || typeof e.key !== "string" || typeof e.value !== "string" || e.key.length === 0 || e.value.length === 0) {
          throw new CheckError(`${p}[${j}]: must be {"key": "...", "value": "..."} with non-empty strings`);
        }
        entries.push({ key: e.key, value: e.value });
      }
    } else if (isObject(d)) {
      for (const k of Object.keys(d)) {
        const v = d[k];
        if (typeof v !== "string" || v.length === 0 || k.length === 0) throw new CheckError(`${p}.${k}: must be a non-empty string`);
        entries.push({ key: k, value: v });
      }
    } else throw new CheckError(`${p}: must be a list of {key, value} entries or an object of key: value`);
    if (entries.length === 0) throw new CheckError(`${p}: needs at least one entry`);
    out.push(entries);
  }
  return { domain, descriptors: out, cost: cost as number | undefined };
}

function sendJsonText(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  const h: Record<string, string | number> = headers ?? {};
  h["content-type"] = "application/json";
  h["content-length"] = Buffer.byteLength(text);
  res.writeHead(status, h);
  res.end(text);
}

function send(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
