/**
 * The path of a request as the app routes it, from its request target as the client wrote it
 * (node's `req.url`). Keys and cost tables must see what the router sees: else a client skips a
 * cost table's price, or gets a fresh allowance, by respelling the target.
 */

/** `scheme://authority` at the start of an absolute-form target. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The path of a request target, without its query or fragment. An absolute-form target
 * (`http://host/login`, which a server must accept, RFC 9112 section 3.2.2, and which node passes
 * on as written) gives its path, as `new URL(req.url, base)` and Fastify's router read it.
 * @example targetPath("http://app.example/login?next=/") // "/login"
 */
export function targetPath(url: string): string {
  let p = url;
  // "/" is 47: the origin form, almost every request.
  if (p.charCodeAt(0) !== 47) {
    const m = ABSOLUTE_FORM.exec(p);
    if (m !== null) {
      p = p.slice(m[0].length);
      if (p.charCodeAt(0) !== 47) p = `/${p}`;
    }
  }
  let end = p.indexOf("?");
  const hash = p.indexOf("#");
  if (hash >= 0 && (end < 0 || hash < end)) end = hash;
  return end < 0 ? p : p.slice(0, end);
}

/**
 * A path percent-decoded as a router that decodes before matching (Fastify's find-my-way) sees
 * it: `/%6Cogin` is `/login`. Escapes of reserved characters (`%2F`, `%3F`, ...) stay, as
 * `decodeURI` leaves them; a malformed escape leaves the path as it is.
 * @example decodedPath("/l%6Fgin") // "/login"
 */
export function decodedPath(path: string): string {
  if (path.indexOf("%") < 0) return path;
  try {
    return decodeURI(path);
  } catch {
    return path;
  }
}
