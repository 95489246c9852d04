import type { RedisShim } from "./client.js";
import { Pipeliner, type PipeliningClient } from "./pipeline.js";

/** The part of ioredis `Redis` and `Cluster` the store uses (no import of ioredis). */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalshaBuffer?(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalBuffer?(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<unknown>;
  /** `Redis#pipeline` (commands of one turn are written together: pipeline.ts). */
  pipeline?(commands: unknown[][]): unknown;
  /** true on a `Cluster`. */
  readonly isCluster?: boolean;
  /** The connection's state: "wait", "connecting", "connect", "ready", "reconnecting", "close" or "end". */
  readonly status?: string;
}

/** ioredis states in which a connection that was up is gone. */
const LOST = new Set(["reconnecting", "close", "end"]);

/**
 * ioredis: positional arguments; a Cluster routes EVALSHA by its first key. On a single Redis the
 * commands issued in one turn of the event loop go out as one pipeline (pipeline.ts).
 */
export function ioredisShim(client: IoRedisLike): RedisShim {
  const isCluster = client.isCluster === true;
  const lost = () => client.status !== undefined && LOST.has(client.status);
  const buffers = typeof client.evalshaBuffer === "function" && typeof client.evalBuffer === "function";
  if (!isCluster && typeof client.pipeline === "function") {
    const pipe = new Pipeliner(client as unknown as PipeliningClient);
    return {
      evalsha: (sha, keys, args) => pipe.send(["evalsha", sha, keys.length, ...keys, ...args]),
      eval: (script, keys, args) => pipe.send(["eval", script, keys.length, ...keys, ...args]),
      ...(buffers
        ? {
            evalshaBuffer: (sha: string, keys: string[], args: string[]) =>
              pipe.send(["evalshaBuffer", sha, keys.length, ...keys, ...args]),
            evalBuffer: (script: string, keys: string[], args: string[]) =>
              pipe.send(["evalBuffer", script, keys.length, ...keys, ...args]),
          }
        : {}),
      del: (keys) => pipe.send(["del", ...keys]),
      isCluster,
      lost,
    };
  }
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
    ...(buffers
      ? {
          evalshaBuffer: (sha: string, keys: string[], args: string[]) => client.evalshaBuffer!(sha, keys.length, ...keys, ...args),
          evalBuffer: (script: string, keys: string[], args: string[]) => client.evalBuffer!(script, keys.length, ...keys, ...args),
        }
      : {}),
    del: (keys) => client.del(...keys),
    isCluster,
    lost,
  };
}
