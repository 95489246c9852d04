/**
 * The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag (the part between the first
 * `{` and the next `}`, when not empty) or of the whole key, modulo 16384, as the Redis Cluster
 * specification defines it. The store uses it to watch each slot's replies separately, so one
 * master going down times out only the keys it serves.
 */
const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c = i << 8;
  for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  TABLE[i] = c;
}

/** The hash slot (0-16383) of `key`. */
export function hashSlot(key: string): number {
  const bytes = new TextEncoder().encode(key);
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // "{"
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // "}"
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  return crc & 0x3fff;
}
