// Types of node.js, for the TypeScript tests that start it.
import type { Hono } from "hono";
import type { HonoRateLimitOptions } from "ratekeeper/hono";
export declare function start(
  options?: HonoRateLimitOptions | Record<string, unknown>,
  listen?: { port?: number; host?: string },
): Promise<{ app: Hono; url: string; close(): Promise<void> }>;
