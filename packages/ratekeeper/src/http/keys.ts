import { describeValue, type ConfigIssue } from "../core/errors.js";
import { fitKey, MAX_KEY_CHARS } from "./key-fit.js";
import type { FrameworkTrust } from "./validations.js";

/**
 * How an adapter reads its framework's request. Defined once per framework, so the core never
 * allocates a wrapper per request.
 */
export interface RequestAccess<Req> {
  method(req: Req): string;
  /** The path without the query string. */
  path(req: Req): string;
  /** The matched route pattern (`/users/:id`) when the framework knows it before the handler runs. */
  route(req: Req): string | undefined;
  /** The socket peer's address. */
  remoteAddress(req: Req): string | undefined;
  /** A header by lower-case name; several lines joined by ", ". */
  header(req: Req, name: string): string | undefined;
  /**
   * The framework's own proxy-trust setting, when it has one and it trusts some proxy for this
   * request (Express `app.set("trust proxy", ...)`, Fastify's `trustProxy`); then
   * {@link RequestAccess.frameworkIp} is the client address the framework resolved with it.
   */
  frameworkTrust?(req: Req): FrameworkTrust | undefined;
  /** The client address as the framework resolves it through its proxy-trust setting (`req.ip`). */
  frameworkIp?(req: Req): string | undefined;
  /**
   * Which forwarding header the request carries, `X-Forwarded-For` first (for the check that warns
   * when one arrives while no proxy is trusted). When absent, two {@link RequestAccess.header}
   * reads decide; node-based adapters scan the raw header list instead (see `rawForwarded`).
   */
  forwarded?(req: Req): "X-Forwarded-For" | "Forwarded" | undefined;
}

/** What a key function is told about the request, besides the request itself. */
export interface KeyInfo {
  /**
   * The client's address (resolved through trusted proxies; IPv6 grouped to its prefix), or
   * "unknown" when there is none (then a key of yours must not rely on it).
   */
  readonly ip: string;
  readonly method: string;
  readonly path: string;
  /** The route pattern when known, else the path. */
  readonly route: string;
}

/**
 * One part of a rate-limit key: the client IP, the method, the route pattern, the path, a header
 * (an API key; falls back to the IP when absent so anonymous clients are not one shared bucket),
 * or a function (a user id). Several parts are joined, e.g. `["ip", "route"]`.
 */
export type KeyPart<Req> =
  "ip" | "method" | "route" | "path" | { header: string } | ((req: Req, info: KeyInfo) => string | undefined | Promise<string | undefined>);

type CompiledPart<Req> = (req: Req, info: KeyInfo) => string | undefined | Promise<string | undefined>;

/** The text a missing or empty key part stands as, so `["ip", fn]` never collapses two parts into one. */
const EMPTY_PART = "-";

/** An HTTP header name (RFC 9110 token). */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;

/**
 * Builds the rate-limit key of a request from the `key` option: the parts joined by `|`, after
 * `keyPrefix`. Built-in parts answer synchronously; a function part may return a promise, which
 * only {@link KeyBuilder.buildAsync} awaits.
 */
export class KeyBuilder<Req> {
  private readonly parts: CompiledPart<Req>[] = [];
  /** The key is the client address alone (the default): no {@link KeyInfo} is built for it. */
  readonly ipOnly: boolean;
  /** No part is a user function, so {@link KeyBuilder.buildSync} can answer. */
  readonly sync: boolean;
  /** A part is the client address ("ip", or a header part, which falls back to it). */
  readonly usesIp: boolean;

  /**
   * @param key the `key` option (`undefined` means `"ip"`)
   * @param issues where problems with the option are added, each naming its path
   */
  constructor(
    key: KeyPart<Req> | readonly KeyPart<Req>[] | undefined,
    private readonly prefix: string,
    private readonly access: RequestAccess<Req>,
    issues: ConfigIssue[],
  ) {
    const raw = key === undefined ? ["ip" as const] : Array.isArray(key) ? (key as readonly KeyPart<Req>[]) : [key as KeyPart<Req>];
    if (raw.length === 0) issues.push({ path: "key", message: "must name at least one part" });
    raw.forEach((p, i) => {
      const c = this.compile(p, Array.isArray(key) ? `key[${i}]` : "key", issues);
      if (c) this.parts.push(c);
    });
    this.ipOnly = raw.length === 1 && raw[0] === "ip";
    this.sync = !raw.some((p) => typeof p === "function");
    this.usesIp = raw.some((p) => p === "ip" || (typeof p === "object" && p !== null));
  }

  private compile(p: KeyPart<Req>, at: string, issues: ConfigIssue[]): CompiledPart<Req> | undefined {
    if (typeof p === "function") return p;
    switch (p) {
      case "ip":
        return (_req, info) => info.ip;
      case "method":
        // HEAD runs the GET handler (the body is only dropped): one bucket, or alternating the two doubles the allowance.
        return (_req, info) => (info.method === "HEAD" ? "GET" : info.method);
      case "route":
        return (_req, info) => info.route;
      case "path":
        return (_req, info) => info.path;
      default:
        break;
    }
    if (typeof p === "object" && p !== null && typeof (p as { header?: unknown }).header === "string" && p.header.length > 0) {
      const name = p.header.toLowerCase();
      // Not an HTTP token (a space, a colon, a non-ASCII letter): no request carries it, so Node
      // never finds it (the part silently keys on the address) and a WHATWG Headers lookup
      // (Hono) throws on every request. " ip" or "ip " is one of these, not the name below.
      if (!HEADER_TOKEN.test(name)) {
        issues.push({
          path: `${at}.header`,
          message: `must be a header name (letters, digits and !#$%&'*+-.^_\`|~; got ${describeValue(p.header)})`,
        });
        return undefined;
      }
      // Its value would be keyed `ip=<value>`, the key of a client at that address without it.
      if (name === "ip") {
        issues.push({
          path: `${at}.header`,
          message:
            'a header named "ip" is keyed ip=<value>, the key a client without it gets (ip=<its address>): a client could name another address and spend its allowance; key on another header',
        });
        return undefined;
      }
      return (req, info) => {
        const v = this.access.header(req, name);
        return v === undefined || v.length === 0 ? `ip=${info.ip}` : `${name}=${v}`;
      };
    }
    issues.push({
      path: at,
      message: `must be "ip", "method", "route", "path", { header: "<name>" } or a function (got ${describeValue(p)})`,
    });
    return undefined;
  }

  /** The request's method, path and route next to its client address. */
  info(req: Req, ip: string): KeyInfo {
    const path = this.access.path(req);
    return { ip, method: this.access.method(req), path, route: this.access.route(req) ?? path };
  }

  /** The key, when {@link KeyBuilder.sync}; `info` is built by the caller unless {@link KeyBuilder.ipOnly}. */
  buildSync(req: Req, ip: string, info: KeyInfo | undefined): string {
    if (info === undefined) return this.prefix + ip;
    let key = this.prefix;
    for (let i = 0; i < this.parts.length; i++) {
      const v = (this.parts[i] as CompiledPart<Req>)(req, info) as string | undefined;
      key += (i === 0 ? "" : "|") + (v === undefined || v === "" ? EMPTY_PART : v);
    }
    // A part the client writes (a header's value, the path) may be longer than the limiter takes.
    return key.length > MAX_KEY_CHARS ? fitKey(key) : key;
  }

  /** The key, awaiting function parts that return promises. */
  async buildAsync(req: Req, ip: string, info: KeyInfo | undefined): Promise<string> {
    if (info === undefined) return this.prefix + ip;
    let key = this.prefix;
    for (let i = 0; i < this.parts.length; i++) {
      let v = (this.parts[i] as CompiledPart<Req>)(req, info);
      if (typeof v === "object") v = await v;
      key += (i === 0 ? "" : "|") + (v === undefined || v === "" ? EMPTY_PART : v);
    }
    return key.length > MAX_KEY_CHARS ? fitKey(key) : key;
  }
}
