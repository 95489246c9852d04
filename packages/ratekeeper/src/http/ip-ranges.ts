/**
 * Prefix arithmetic on address ranges, for `AddressSet` (ip.ts): whether two addresses share a
 * prefix (every lookup), and whether ranges together hold every address of their family (once,
 * when the middleware is built: trusted proxies covering everything let any client choose its
 * own address, validations.ts; split ranges such as `0.0.0.0/1` + `128.0.0.0/1` are as wide as one
 * `/0`, so the union is what counts; addresses as BigInt there, for 128-bit IPv6).
 */

/** Whether two IPv4 addresses (32-bit values) share their first `bits` bits. */
export function sameV4Prefix(a: number, b: number, bits: number): boolean {
  const size = 2 ** (32 - bits);
  return Math.floor(a / size) === Math.floor(b / size);
}

/** Whether two IPv6 addresses (eight groups each) share their first `bits` bits. */
export function sameV6Prefix(a: readonly number[], b: readonly number[], bits: number): boolean {
  for (let i = 0; i < 8 && bits > i * 16; i++) {
    const keep = Math.min(16, bits - i * 16);
    const mask = (0xffff << (16 - keep)) & 0xffff;
    if (((a[i] as number) & mask) !== ((b[i] as number) & mask)) return false;
  }
  return true;
}

/** A range: its first address and its prefix length, in a family of `width` bits. */
export interface PrefixRange {
  readonly first: bigint;
  readonly bits: number;
}

/** Whether the ranges' union is the whole `width`-bit space (no address outside every range). */
export function coversWholeSpace(ranges: readonly PrefixRange[], width: 32 | 128): boolean {
  const spans = ranges
    .map(({ first, bits }) => {
      const host = BigInt(width - bits);
      const start = (first >> host) << host; // host bits zeroed, as a router reads the range
      return { start, end: start + (1n << host) };
    })
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let reached = 0n; // every address below this is covered
  for (const s of spans) {
    if (s.start > reached) return false;
    if (s.end > reached) reached = s.end;
  }
  return reached >= 1n << BigInt(width);
}

/** An IPv6 address's eight groups as one 128-bit number. */
export function ipv6Value(groups: readonly number[]): bigint {
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(g);
  return v;
}
