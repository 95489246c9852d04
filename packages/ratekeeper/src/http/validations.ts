import { describeValue, type ConfigIssue } from "../core/errors.js";
import type { ClientIpResolver } from "./ip.js";
import { isPlainObject } from "../core/plain-object.js";

/**
 * Checks the middleware makes on live requests, about how the client address is found, each
 * with a code, a docs entry (docs/middleware.md#validations) and what to do. Like
 * express-rate-limit's validations: each warns once per middleware (on `console.warn`, or
 * `onWarning`), never throws, and can be turned off with the `validate` option.
 *
 * - `RK_FORWARDED_HEADER_IGNORED` (`validate.forwardedHeader`): a request carried
 *   `X-Forwarded-For` or `Forwarded` while no proxy is trusted. Behind a proxy every client then
 *   has the proxy's address: one bucket for everybody.
 * - `RK_PERMISSIVE_TRUST_PROXY` (`validate.trustProxy`): the framework trusts every hop
 *   (Express `app.set("trust proxy", true)`, `Fastify({ trustProxy: true })`), or
 *   `trustedProxies` holds every IPv4 or IPv6 address (`0.0.0.0/0`, `::/0`, or split ranges), so any client
 *   picks its own key by writing `X-Forwarded-For`.
 * - `RK_DOUBLE_COUNT` (express-rate-limit's options only): one middleware met the same request
 *   twice (mounted twice on its way); it was counted once.
 * - `RK_TRUST_PROXY_OVERRIDDEN` (`validate.trustProxy`): `trustedProxies` and the framework's
 *   own setting found different clients for a request; `trustedProxies` wins.
 * - `RK_STORE_REUSE` (`validate.unsharedStore`, told when the middleware is built): another
 *   middleware of this process counts in the same counters (same store, same limits, neither
 *   naming a namespace); see counter-claims.ts.
 */
export type ValidationCode =
  "RK_FORWARDED_HEADER_IGNORED" | "RK_PERMISSIVE_TRUST_PROXY" | "RK_TRUST_PROXY_OVERRIDDEN" | "RK_DOUBLE_COUNT" | "RK_STORE_REUSE";

/** A validation's warning, for `onWarning`. */
export interface RateLimitWarning {
  readonly code: ValidationCode;
  readonly message: string;
}

/** The `validate` option: `false` turns every check off; an object turns single checks off. @default true */
export type ValidateOption =
  | boolean
  | { readonly forwardedHeader?: boolean; readonly trustProxy?: boolean; readonly unsharedStore?: boolean; readonly default?: boolean };

/** The checks, each on or off. */
export interface ValidationChecks {
  readonly forwardedHeader: boolean;
  readonly trustProxy: boolean;
  readonly unsharedStore: boolean;
}

const CHECKS = ["forwardedHeader", "trustProxy", "unsharedStore"] as const;

/** Where each code is explained. */
const DOCS = "ratekeeper's docs/middleware.md#validations";

/** A framework's own proxy-trust setting, as an adapter reads it from a request. */
export interface FrameworkTrust {
  /** How the user wrote it, for messages: `app.set("trust proxy", true)`. */
  readonly setting: string;
  /** It trusts every hop: any client can choose the address. */
  readonly permissive: boolean;
}

/** The `validate` option checked; its switches. */
export function resolveValidate(v: unknown, issues: ConfigIssue[]): ValidationChecks {
  const all = (on: boolean): ValidationChecks => ({ forwardedHeader: on, trustProxy: on, unsharedStore: on });
  if (v === undefined || v === true) return all(true);
  if (v === false) return all(false);
  if (isPlainObject(v)) {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (!(CHECKS as readonly string[]).includes(k) && k !== "default") {
        issues.push({ path: `validate.${k}`, message: `unknown check: the checks are ${CHECKS.join(", ")} (or default)` });
      } else if (typeof o[k] !== "boolean") {
        issues.push({ path: `validate.${k}`, message: `must be true or false (got ${describeValue(o[k])})` });
      }
    }
    const def = o.default !== false;
    const on = (k: (typeof CHECKS)[number]) => (o[k] ?? def) !== false;
    return { forwardedHeader: on("forwardedHeader"), trustProxy: on("trustProxy"), unsharedStore: on("unsharedStore") };
  }
  issues.push({
    path: "validate",
    message: `must be true, false or { ${CHECKS.map((k) => `${k}?: boolean`).join(", ")} } (got ${describeValue(v)})`,
  });
  return all(true);
}

/** Emits each validation's warning at most once per middleware. */
export class Validations {
  /** Still watching for a forwarding header from an untrusted peer. */
  watchForwarded: boolean;
  /** Still checking the framework's trust setting. */
  watchTrust: boolean;
  /** Requests left to compare `trustedProxies` with the framework's answer (a bounded cost). */
  overrideChecks = 1000;
  private readonly warned = new Set<ValidationCode>();

  constructor(
    checks: ValidationChecks,
    private readonly onWarning: ((w: RateLimitWarning) => void) | undefined,
  ) {
    this.watchForwarded = checks.forwardedHeader;
    this.watchTrust = checks.trustProxy;
  }

  /** A forwarding header arrived from `peer` while no proxy is trusted. */
  forwardedIgnored(header: string, peer: string | undefined): void {
    this.watchForwarded = false;
    this.warn(
      "RK_FORWARDED_HEADER_IGNORED",
      `a request carried ${header} but no proxy is trusted, so it was ignored and the client was keyed by the ` +
        `connection's address (${peer ?? "unknown"}). Behind a proxy or load balancer every client then shares the ` +
        `proxy's address and one bucket: name the proxies with trustedProxies (e.g. trustedProxies: ["10.0.0.0/8"] or ` +
        `["loopback"]), or set Express's app.set("trust proxy", <number of proxies or their addresses>) or ` +
        `Fastify({ trustProxy }). If clients reach this server directly the header is theirs and rightly ignored: ` +
        `turn this check off with validate: { forwardedHeader: false }.`,
    );
  }

  /** The framework trusts every hop. */
  permissive(t: FrameworkTrust): void {
    this.watchTrust = false;
    this.warn(
      "RK_PERMISSIVE_TRUST_PROXY",
      `${t.setting} trusts every proxy, so any client can choose its rate-limit key by sending ` +
        `X-Forwarded-For: <any address> and never be limited. Set it to the number of proxies in front of the app ` +
        `(app.set("trust proxy", 1)) or to their addresses, or give ratekeeper trustedProxies (which then wins). ` +
        `If you accept the risk, turn this check off with validate: { trustProxy: false }.`,
    );
  }

  /** `trustedProxies` holds every IPv4 or every IPv6 address (told once, when the middleware is built). */
  wideTrustedProxies(entries: unknown): void {
    this.warn(
      "RK_PERMISSIVE_TRUST_PROXY",
      `trustedProxies: ${JSON.stringify(entries)} trusts every address of a family, so any client can choose its ` +
        `rate-limit key by sending X-Forwarded-For: <any address> and never be limited. Name only the proxies in ` +
        `front of the app (e.g. ["10.0.0.0/8"] or ["loopback"]). If you accept the risk, turn this check off with ` +
        `validate: { trustProxy: false }.`,
    );
  }

  /** `trustedProxies` and the framework's setting disagree about a request's client. */
  overridden(t: FrameworkTrust, ours: string | undefined, theirs: string | undefined): void {
    this.watchTrust = false;
    this.warn(
      "RK_TRUST_PROXY_OVERRIDDEN",
      `trustedProxies found the client ${ours ?? "unknown"} where ${t.setting} finds ${theirs ?? "unknown"}; ` +
        `rate-limit keys use trustedProxies. Make the two name the same proxies, or drop trustedProxies to use ` +
        `the app's setting. Turn this check off with validate: { trustProxy: false }.`,
    );
  }

  /** Another middleware of this process counts in `namespace` of the same store (told once, when built). */
  storeReuse(namespace: string, kind: "limits" | "concurrency"): void {
    const what =
      kind === "limits"
        ? `the same limits (namespace ${JSON.stringify(namespace)}, which defaults to the limits), so the two count in the same ` +
          `counters: a request through both is counted twice, and each limits the other's routes`
        : `the same concurrency limit (concurrency namespace ${JSON.stringify(namespace)}, which defaults to the limit), so ` +
          `the two share their in-flight leases: each admits fewer than its limit while the other is busy`;
    const where = kind === "limits" ? "namespace" : "concurrency.namespace";
    this.warn(
      "RK_STORE_REUSE",
      `another middleware was given the same store and ${what}. Give each middleware its own ${where} ` +
        `(${where}: "login"), or a store of its own. If they are meant to share one budget, give both the same ` +
        `${where}, or one limiter built once; or turn this check off with validate: { unsharedStore: false }.`,
    );
  }

  private warn(code: ValidationCode, text: string): void {
    if (this.warned.has(code)) return;
    this.warned.add(code);
    const message = `ratekeeper [${code}]: ${text} See ${DOCS}`;
    if (this.onWarning !== undefined) {
      try {
        this.onWarning({ code, message });
      } catch {
        // A throwing warning handler must not take the request down.
      }
    } else console.warn(message);
  }
}

/** The middleware's {@link Validations}, having warned already when `trustedProxies` trusts everyone. */
export function trustValidations(
  checks: ValidationChecks,
  onWarning: ((w: RateLimitWarning) => void) | undefined,
  ips: ClientIpResolver,
  trustedProxies: unknown,
): Validations {
  const v = new Validations(checks, onWarning);
  if (checks.trustProxy && ips.trustsEveryone) v.wideTrustedProxies(trustedProxies);
  return v;
}
