import { createHash } from "node:crypto";
import { isIPv6 } from "node:net";
import type { Request, Response } from "express";
import type { RateLimitResult } from "../http/core.js";
import { ipv6Prefix, normalizeIp } from "../http/ip.js";
import { identifierOf, type ExpressRateLimitCompatOptions, type RateLimitInfo, type ResolvedCompat } from "./express-compat-options.js";

/** `req.rateLimit`: used counts this request (a denied one included, as in express-rate-limit). */
export function infoOf(d: NonNullable<RateLimitResult["decision"]>, limit: number, key: string, nowMs: number): RateLimitInfo {
  const used = d.allowed ? limit - d.remaining : limit + 1;
  return { limit, used, remaining: d.allowed ? d.remaining : 0, resetTime: new Date(nowMs + d.resetAfterMs), key };
}

export function resetSeconds(info: RateLimitInfo, nowMs: number, windowMs: number): number {
  return info.resetTime === undefined ? Math.ceil(windowMs / 1000) : Math.max(0, Math.ceil((info.resetTime.getTime() - nowMs) / 1000));
}

/** express-rate-limit's headers, in its formats. */
export async function writeHeaders(
  res: Response,
  info: RateLimitInfo,
  config: ResolvedCompat,
  o: ExpressRateLimitCompatOptions,
  req: Request,
  nowMs: number,
): Promise<void> {
  if (res.headersSent) return;
  const windowS = Math.ceil(config.windowMs / 1000);
  const reset = resetSeconds(info, nowMs, config.windowMs);
  if (config.legacyHeaders) {
    res.setHeader("X-RateLimit-Limit", String(info.limit));
    res.setHeader("X-RateLimit-Remaining", String(info.remaining));
    if (info.resetTime !== undefined) {
      res.setHeader("Date", new Date(nowMs).toUTCString());
      res.setHeader("X-RateLimit-Reset", String(Math.ceil(info.resetTime.getTime() / 1000)));
    }
  }
  switch (config.standardHeaders) {
    case false:
      break;
    case "draft-6":
      res.setHeader("RateLimit-Policy", `${info.limit};w=${windowS}`);
      res.setHeader("RateLimit-Limit", String(info.limit));
      res.setHeader("RateLimit-Remaining", String(info.remaining));
      res.setHeader("RateLimit-Reset", String(reset));
      break;
    case "draft-7":
      res.setHeader("RateLimit-Policy", `${info.limit};w=${windowS}`);
      res.setHeader("RateLimit", `limit=${info.limit}, remaining=${info.remaining}, reset=${reset}`);
      break;
    case "draft-8": {
      const id = o.identifier;
      const name = typeof id === "function" ? await id(req, res) : (id ?? identifierOf(info.limit, config.windowMs));
      // The partition key: 12 hex digits of the key's SHA-256, base64-encoded (as express-rate-limit does).
      const pk = Buffer.from(createHash("sha256").update(info.key).digest("hex").slice(0, 12)).toString("base64");
      res.append("RateLimit", `"${name}"; r=${info.remaining}; t=${reset}`);
      res.append("RateLimit-Policy", `"${name}"; q=${info.limit}; w=${windowS}; pk=:${pk}:`);
      break;
    }
  }
}

/**
 * express-rate-limit's `ipKeyGenerator(ip, ipv6Subnet)`, with its answers: an IPv4 address (or an
 * IPv4-mapped or -compatible IPv6 one) as its IPv4 text; another IPv6 address as its network
 * prefix (`2001:db8:1200::/56`), or unchanged with `ipv6Subnet: false`. For a custom
 * `keyGenerator` that falls back to the address: one host cannot rotate through its IPv6 prefix.
 * @default ipv6Subnet 56
 * @example keyGenerator: (req) => req.user?.id ?? ipKeyGenerator(req.ip ?? "")
 */
export function ipKeyGenerator(ip: string, ipv6Subnet: number | false = 56): string {
  if (!isIPv6(ip)) return ip;
  const n = normalizeIp(ip) ?? ip;
  if (!n.includes(":")) return n;
  // The deprecated IPv4-compatible form ::a.b.c.d (RFC 4291 section 2.5.5.1); not :: or ::1.
  const compat = /^::(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  if (compat !== null) return compat[1] as string;
  return ipv6Subnet === false || ipv6Subnet === 0 ? ip : ipv6Prefix(n, ipv6Subnet);
}
