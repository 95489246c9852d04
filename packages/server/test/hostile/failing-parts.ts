/**
 * The parts the error-answer tests (internal-error-*, store-error-body, store-range-error) build a
 * service from: stores and an overrides database whose every call fails, a logger whose lines the
 * test reads, and the HTTP server on a free loopback port.
 */
import { Writable } from "node:stream";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { MemoryStore, type BoundLeases, type BoundStore, type Store } from "ratekeeper";
import type { DecisionService } from "../../src/index.js";
import { createLogger } from "../../src/log.js";
import { Metrics } from "../../src/metrics.js";
import type { OverrideStore } from "../../src/overrides/types.js";
import { createHttpServer } from "../../src/transport/http.js";

/** The admin token of {@link serveHttp}'s servers. */
export const TOKEN = "t0ken-t0ken-t0ken";

/** A store whose every call (decisions and leases) fails with `error()`: rejected, or thrown at once (`sync`). */
export function failingStore(error: () => Error, sync = false): Store {
  const fail = sync
    ? () => {
        throw error();
      }
    : () => Promise.reject(error());
  const bound = { consume: fail, peek: fail, refund: fail, reset: fail } as unknown as BoundStore;
  const leases = { acquire: fail, renew: fail, release: fail, count: fail } as unknown as BoundLeases;
  return { bind: () => bound, bindLeases: () => leases };
}

/** An overrides database whose every call rejects with `error()`. */
export function failingOverrides(error: () => Error, kind: OverrideStore["kind"] = "sqlite", description = "test"): OverrideStore {
  const fail = () => Promise.reject(error());
  return {
    kind,
    description,
    get: fail,
    create: fail,
    update: fail,
    put: fail,
    putMany: fail,
    delete: fail,
    list: fail,
    currentVersion: fail,
    scan: fail,
    changesSince: fail,
    purge: fail,
    watch: () => () => undefined,
    close: () => Promise.resolve(),
  };
}

/** A logger as the service's (createLogger: repeats of an errorId counted, not written) writing its lines, parsed, to `lines`. */
export function captureLog(): { lines: Record<string, unknown>[]; logger: pino.Logger } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger("info", sink) };
}

/** The error id an answer's message gives. */
export const idIn = (text: string): string | undefined => /error id ([0-9a-f]{8,})/.exec(text)?.[1];

/** The service's HTTP server (admin API on, {@link TOKEN}) on a free loopback port: its URL, and how to close it. */
export async function serveHttp(
  service: DecisionService,
  opts: { logger?: pino.Logger; overridesStore?: OverrideStore } = {},
): Promise<{ url: string; close: () => void }> {
  const server = await createHttpServer({
    service,
    metrics: new Metrics(),
    logger: opts.logger ?? createLogger("silent"),
    readiness: () => ({ ready: true }),
    adminToken: TOKEN,
    overridesStore: opts.overridesStore,
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const close = () => {
    server.closeAllConnections();
    server.close();
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close };
}

/**
 * A memory store (`inner`, to read what was charged) whose `n`th consume (counted over every
 * limiter bound to it, from 1) rejects with `error()`; with `refundsFail`, every refund rejects too.
 */
export function storeFailingOnCall(
  n: number,
  error: () => Error,
  refundsFail = false,
): { store: Store; inner: MemoryStore; consumes: () => number; refunds: () => number } {
  const inner = new MemoryStore();
  let consumes = 0;
  let refunds = 0;
  const store: Store = {
    bind(limits, namespace, options) {
      const b = inner.bind(limits, namespace, options);
      const bound: BoundStore = {
        consume: (key, cost, nowMs, maxDelayMs) => (++consumes === n ? Promise.reject(error()) : b.consume(key, cost, nowMs, maxDelayMs)),
        peek: (key, cost, nowMs) => b.peek(key, cost, nowMs),
        refund: (key, cost, nowMs) => {
          refunds++;
          return refundsFail ? Promise.reject(error()) : b.refund(key, cost, nowMs);
        },
        reset: (key) => b.reset(key),
      };
      return bound;
    },
  };
  return { store, inner, consumes: () => consumes, refunds: () => refunds };
}
