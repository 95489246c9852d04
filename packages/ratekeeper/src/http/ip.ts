import { collectIssues, describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import { coversWholeSpace, ipv6Value, sameV4Prefix, sameV6Prefix } from "./ip-ranges.js";
import { parseIpv4, parseIpv6 } from "./ip-parse.js";

/**
 * Client addresses, resolved safely.
 *
 * - Proxy headers are client input: anyone can send `X-Forwarded-For: 1.2.3.4`. They are read only
 *   when the direct peer is a proxy the user named, and then from the right, skipping trusted hops
 *   (each trusted proxy appends the address it saw; the leftmost entries are whatever the client
 *   wrote). This is the rule of Express's `trust proxy` / proxy-addr and of nginx's
 *   `real_ip_recursive on`.
 * - `::ffff:1.2.3.4` (an IPv4 client on a dual-stack socket, RFC 4291 section 2.5.5.2) is the same
 *   host as `1.2.3.4`.
 * - One IPv6 host usually owns a whole /64 (RFC 4291 section 2.5.4; SLAAC privacy addresses,
 *   RFC 8981, rotate inside it), so IPv6 clients are keyed by their prefix, /64 by default.
 */

/** Named ranges accepted in `trustedProxies`, as in proxy-addr. */
const PRESETS: Readonly<Record<string, readonly string[]>> = {
  loopback: ["127.0.0.0/8", "::1/128"],
  linklocal: ["169.254.0.0/16", "fe80::/10"],
  uniquelocal: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
};

/**
 * Normalises an address to one text per address, so that no spelling of it gets a key (or a
 * trust or allow/deny answer) of its own: strips an IPv6 zone (`fe80::1%eth0`), unwraps every
 * spelling of IPv4-mapped IPv6 (`::ffff:1.2.3.4`, `0:0:0:0:0:ffff:1.2.3.4`, `::ffff:102:304` ->
 * `1.2.3.4`) and prints other IPv6 in RFC 5952 form (`2001:DB8:0:0::0001` -> `2001:db8::1`).
 * Returns `undefined` for anything that is not an IP address.
 * @example normalizeIp("::ffff:10.0.0.1") // "10.0.0.1"
 */
export function normalizeIp(address: string | undefined): string | undefined {
  if (address === undefined || address.length === 0) return undefined;
  const zone = address.indexOf("%");
  // A zone (RFC 4007) names the local interface, not the host: only valid on IPv6.
  if (zone < 0 && parseIpv4(address) !== undefined) return address;
  // The form node gives an IPv4 client of a dual-stack server: its tail, with no parse of the rest.
  if (zone < 0 && address.startsWith("::ffff:") && parseIpv4(address, 7) !== undefined) return address.slice(7);
  const g = parseIpv6(zone < 0 ? address : address.slice(0, zone));
  if (g === undefined) return undefined;
  // IPv4-mapped (RFC 4291 section 2.5.5.2): ::ffff:a.b.c.d, however it is written.
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    const hi = g[6] as number;
    const lo = g[7] as number;
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return compressIpv6(g);
}

/**
 * Expands a valid IPv6 address into its eight 16-bit groups. Handles `::` and an embedded
 * IPv4 tail (`::ffff:1.2.3.4`, `64:ff9b::1.2.3.4`).
 * @throws RangeError when `address` is not an IPv6 address
 * @example expandIpv6("2001:db8::1") // [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]
 */
export function expandIpv6(address: string): number[] {
  const zone = address.indexOf("%");
  const groups = parseIpv6(zone < 0 ? address : address.slice(0, zone));
  if (groups === undefined) throw new RangeError(`address: not an IPv6 address (got ${describeValue(address)})`);
  return groups;
}

/**
 * The network prefix of an IPv6 address as `<address>/<bits>`, host bits zeroed, in the
 * canonical compressed form (RFC 5952), e.g. `2001:db8:1:2::/64`.
 * @example ipv6Prefix("2001:db8:1:2:a:b:c:d", 64) // "2001:db8:1:2::/64"
 */
export function ipv6Prefix(address: string, bits: number): string {
  const g = expandIpv6(address);
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    g[i] = keep === 16 ? (g[i] as number) : keep === 0 ? 0 : (g[i] as number) & ((0xffff << (16 - keep)) & 0xffff);
  }
  return `${compressIpv6(g)}/${bits}`;
}

/** RFC 5952 section 4: lower-case hex, no leading zeros, the longest run (>= 2) of zero groups as `::`. */
function compressIpv6(g: readonly number[]): string {
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/**
 * A set of addresses and CIDR ranges (or the names `loopback`, `linklocal`, `uniquelocal`),
 * checked by prefix (no node:net, so it runs on every runtime).
 * @example new AddressSet(["10.0.0.0/8", "loopback"], "trustedProxies").has("10.1.2.3") // true
 */
export class AddressSet {
  /** IPv4 ranges: the network's 32-bit value and its prefix length. */
  private readonly v4: { value: number; bits: number }[] = [];
  /** IPv6 ranges: the network's eight groups and its prefix length. */
  private readonly v6: { groups: number[]; bits: number }[] = [];
  readonly size: number;

  /**
   * @param entries addresses (`10.0.0.1`, `::1`) and ranges (`10.0.0.0/8`, `2001:db8::/32`)
   * @param field the option's name, for error messages
   * @throws RateLimitConfigError naming each bad entry
   */
  constructor(entries: readonly string[], field: string) {
    const issues: ConfigIssue[] = [];
    if (!Array.isArray(entries)) {
      throw new RateLimitConfigError([
        { path: field, message: `must be an array of addresses or CIDR ranges (got ${describeValue(entries)})` },
      ]);
    }
    let n = 0;
    entries.forEach((raw, i) => {
      const preset = typeof raw === "string" ? PRESETS[raw] : undefined;
      for (const e of preset ?? [raw]) {
        if (!this.add(e)) {
          issues.push({
            path: `${field}[${i}]`,
            message: `must be an IP address, a CIDR range or one of loopback, linklocal, uniquelocal (got ${describeValue(raw)})`,
          });
          return;
        }
        n++;
      }
    });
    if (issues.length > 0) throw new RateLimitConfigError(issues);
    this.size = n;
  }

  private add(entry: unknown): boolean {
    if (typeof entry !== "string") return false;
    const slash = entry.indexOf("/");
    const text = slash < 0 ? entry : entry.slice(0, slash);
    const addr = normalizeIp(text);
    if (addr === undefined) return false;
    const v4 = parseIpv4(addr);
    // An IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`) counts its bits in IPv6: /96 and longer
    // are the IPv4 range of bits - 96, as proxy-addr reads them; shorter ones stay IPv6 ranges.
    const writtenV6 = text.includes(":");
    const max = v4 === undefined || writtenV6 ? 128 : 32;
    const bitsText = slash < 0 ? String(max) : entry.slice(slash + 1);
    const bits = Number(bitsText);
    if (!/^\d{1,3}$/.test(bitsText) || bits > max) return false;
    if (v4 !== undefined && (!writtenV6 || bits >= 96)) this.v4.push({ value: v4, bits: writtenV6 ? bits - 96 : bits });
    else this.v6.push({ groups: parseIpv6(v4 === undefined ? addr : text) as number[], bits });
    return true;
  }

  /**
   * Whether the set holds every IPv4 address (`0.0.0.0/0`, split ranges such as `0.0.0.0/1` and
   * `128.0.0.0/1`, or IPv6 ranges holding all of `::ffff:0:0/96`) or every IPv6 one (`::/0`, or
   * ranges together as wide). As trusted proxies, such a set lets any client choose its own address.
   */
  get coversAllOfAFamily(): boolean {
    const mapped = [0, 0, 0, 0, 0, 0xffff, 0, 0];
    if (this.v6.some((r) => r.bits <= 96 && sameV6Prefix(mapped, r.groups, r.bits))) return true;
    const v4 = this.v4.map((r) => ({ first: BigInt(r.value), bits: r.bits }));
    return (
      coversWholeSpace(v4, 32) ||
      coversWholeSpace(
        this.v6.map((r) => ({ first: ipv6Value(r.groups), bits: r.bits })),
        128,
      )
    );
  }

  /** Whether a normalised address (see {@link normalizeIp}) is in the set. */
  has(address: string): boolean {
    if (!address.includes(":")) {
      const a = parseIpv4(address);
      if (a === undefined) return false;
      if (this.v4.some((r) => sameV4Prefix(a, r.value, r.bits))) return true;
      // As node:net's BlockList: an IPv4 address is also its IPv4-mapped IPv6 form (::ffff:a.b.c.d),
      // which IPv6 ranges as wide as ::/80 contain.
      if (this.v6.length === 0) return false;
      const mapped = [0, 0, 0, 0, 0, 0xffff, Math.floor(a / 65536), a % 65536];
      return this.v6.some((r) => sameV6Prefix(mapped, r.groups, r.bits));
    }
    const g = parseIpv6(address);
    return g !== undefined && this.v6.some((r) => sameV6Prefix(g, r.groups, r.bits));
  }
}

/**
 * The addresses a proxy header lists, left (client) to right (nearest proxy). Accepts
 * `X-Forwarded-For: a, b` and RFC 7239 `Forwarded: for=a;proto=https, for="[b]:443"`.
 * Entries keep their original text (ports and brackets removed); invalid ones become "".
 * @example parseForwardedChain('for=192.0.2.60, for="[2001:db8::17]:4711"', "forwarded") // ["192.0.2.60", "2001:db8::17"]
 */
export function parseForwardedChain(value: string, format: "x-forwarded-for" | "forwarded"): string[] {
  const out: string[] = [];
  for (const element of value.split(",")) {
    let text = element.trim();
    if (format === "forwarded") {
      const m = /(?:^|;)\s*for\s*=\s*("[^"]*"|[^;]*)/i.exec(text);
      text = m ? (m[1] as string).trim().replace(/^"|"$/g, "") : "";
    }
    out.push(stripPort(text));
  }
  return out;
}

/** `[2001:db8::1]:443` -> `2001:db8::1`; `1.2.3.4:80` -> `1.2.3.4`; otherwise unchanged. */
export function stripPort(text: string): string {
  if (text.startsWith("[")) {
    const end = text.indexOf("]");
    return end < 0 ? "" : text.slice(1, end);
  }
  const colon = text.indexOf(":");
  if (colon > 0 && colon === text.lastIndexOf(":")) return text.slice(0, colon);
  return text;
}

/** Options of {@link ClientIpResolver}. */
export interface ClientIpOptions {
  /**
   * Proxies whose forwarding header is believed: addresses, CIDR ranges, or `loopback`,
   * `linklocal`, `uniquelocal`. Without it, proxy headers are ignored and the client is the
   * socket's peer.
   * @default [] (trust nobody)
   * @example ["10.0.0.0/8", "loopback"]
   */
  trustedProxies?: readonly string[];
  /**
   * Which header the trusted proxies write. Only one is read, so a client cannot smuggle an
   * address through the other one.
   * @default "x-forwarded-for"
   */
  forwardedHeader?: "x-forwarded-for" | "forwarded";
  /**
   * IPv6 clients are keyed by this prefix length, so one host cannot rotate through its /64.
   * `128` keys each address on its own.
   * @default 64
   */
  ipv6Subnet?: number;
}

/** Entries of each of ClientIpResolver's memos. */
const MEMO_SIZE = 4096;

/**
 * Resolves the client's address from the socket's peer and, behind trusted proxies, the
 * forwarding header read from the right.
 * @example
 * const r = new ClientIpResolver({ trustedProxies: ["10.0.0.0/8"] });
 * r.resolve("10.0.0.5", "6.6.6.6, 203.0.113.9") // "203.0.113.9"
 */
export class ClientIpResolver {
  private readonly trusted: AddressSet | undefined;
  readonly header: "x-forwarded-for" | "forwarded";
  readonly ipv6Subnet: number;
  /**
   * Socket peers already normalised (`null`: not an address) and IPv6 addresses already grouped.
   * A keep-alive connection sends its peer address with every request, and normalizeIp's
   * isIP() regular expression was the largest single cost of the middleware's own work in a
   * CPU profile (docs/benchmarks/http.md); a Map lookup of the same string is a few ns. At most
   * {@link MEMO_SIZE} entries each, emptied when full, so a flood of addresses costs memory O(1).
   */
  private readonly peers = new Map<string, string | null>();
  private readonly groups = new Map<string, string>();

  constructor(options: ClientIpOptions = {}) {
    const issues: ConfigIssue[] = [];
    const subnet = options.ipv6Subnet ?? 64;
    if (!Number.isInteger(subnet) || subnet < 1 || subnet > 128) {
      issues.push({ path: "ipv6Subnet", message: `must be a whole number from 1 to 128 (got ${describeValue(options.ipv6Subnet)})` });
    }
    const header = options.forwardedHeader ?? "x-forwarded-for";
    if (header !== "x-forwarded-for" && header !== "forwarded") {
      issues.push({
        path: "forwardedHeader",
        message: `must be "x-forwarded-for" or "forwarded" (got ${describeValue(options.forwardedHeader)})`,
      });
    }
    const proxies = options.trustedProxies;
    const trusted = proxies === undefined ? undefined : collectIssues(issues, () => new AddressSet(proxies, "trustedProxies"));
    if (issues.length > 0) throw new RateLimitConfigError(issues);
    this.trusted = trusted !== undefined && trusted.size > 0 ? trusted : undefined;
    this.header = header;
    this.ipv6Subnet = subnet;
  }

  /** Whether `trustedProxies` holds every IPv4 or every IPv6 address: any client then picks its own. */
  get trustsEveryone(): boolean {
    return this.trusted !== undefined && this.trusted.coversAllOfAFamily;
  }

  /** Whether any proxy is trusted (so the forwarding header needs reading). */
  get trustsProxies(): boolean {
    return this.trusted !== undefined;
  }

  /**
   * The client's address (normalised, not yet grouped), or `undefined` when the peer address
   * is unknown.
   * @param peer the socket's remote address
   * @param forwarded the forwarding header's value (several header lines joined by ","), if any
   */
  resolve(peer: string | undefined, forwarded: string | undefined): string | undefined {
    let hop = this.normalizePeer(peer);
    if (hop === undefined || this.trusted === undefined || forwarded === undefined || !this.trusted.has(hop)) return hop;
    const chain = parseForwardedChain(forwarded, this.header);
    for (let i = chain.length - 1; i >= 0; i--) {
      const next = normalizeIp(chain[i]);
      // A trusted proxy that forwarded something unparseable: stop at the last address we can vouch for.
      if (next === undefined) return hop;
      hop = next;
      if (!this.trusted.has(hop)) return hop;
    }
    return hop;
  }

  /** {@link normalizeIp} of a socket's peer, remembered. */
  private normalizePeer(peer: string | undefined): string | undefined {
    if (peer === undefined) return undefined;
    const known = this.peers.get(peer);
    if (known !== undefined) return known === null ? undefined : known;
    const hop = normalizeIp(peer);
    if (this.peers.size >= MEMO_SIZE) this.peers.clear();
    this.peers.set(peer, hop === undefined ? null : hop);
    return hop;
  }

  /** The rate-limit identity of an address: IPv4 as is, IPv6 as its prefix (`2001:db8::/64`). */
  group(ip: string): string {
    if (!ip.includes(":") || this.ipv6Subnet === 128) return ip;
    let g = this.groups.get(ip);
    if (g === undefined) {
      g = ipv6Prefix(ip, this.ipv6Subnet);
      if (this.groups.size >= MEMO_SIZE) this.groups.clear();
      this.groups.set(ip, g);
    }
    return g;
  }
}
