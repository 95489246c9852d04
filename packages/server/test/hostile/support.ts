/**
 * Helpers for the hostile suite: plain HTTP requests sent from a chosen loopback source address,
 * so that one test can play an attacker and a victim with different client addresses. (Outside
 * binaries are found by test-support/outside.ts.)
 */
import { request } from "node:http";

/** A response, read whole. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * GET `http://127.0.0.1:<port><pathAndQuery>` from source address `from` (any 127.0.0.0/8
 * address works on Linux loopback), with the given request headers. The path is sent exactly
 * as given (no normalisation), as a hostile client would.
 */
export function getFrom(from: string, port: number, pathAndQuery: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: pathAndQuery, localAddress: from, headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}
