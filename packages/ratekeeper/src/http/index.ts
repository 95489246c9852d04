/**
 * `ratekeeper/http`: the framework-neutral core of the HTTP middleware (client IP resolution,
 * keys, costs, headers, 429 bodies, shaping). Adapters: `ratekeeper/express`, `ratekeeper/fastify`,
 * `ratekeeper/hono`, `ratekeeper/node`.
 * @example
 * import { ClientIpResolver } from "ratekeeper/http";
 * new ClientIpResolver({ trustedProxies: ["10.0.0.0/8"] }).resolve("10.0.0.2", "203.0.113.7") // "203.0.113.7"
 */
export {
  HttpRateLimiter,
  type RateLimitOptions,
  type RateLimitResult,
  type RateLimitEvent,
  type RequestAccess,
  type KeyInfo,
  type KeyPart,
  type CostOption,
  type RateLimitWarning,
  type ValidateOption,
  type ValidationCode,
  type FrameworkTrust,
} from "./core.js";
export { HeaderWriter, HEADER_STYLES, toSeconds, wireName, type HeaderStyle } from "./headers.js";
export { AddressSet, ClientIpResolver, expandIpv6, ipv6Prefix, normalizeIp, parseForwardedChain, type ClientIpOptions } from "./ip.js";
export { PROBLEM_CONTENT_TYPE, QUOTA_EXCEEDED, forbidden, tooManyRequests, unavailable, type ProblemDetails } from "./problem.js";
