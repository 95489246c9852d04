// Types of app.js, for the TypeScript tests that start it.
import type { Server } from "node:http";
import type { NodeRateLimitOptions } from "ratekeeper/node";
export declare const defaultOptions: NodeRateLimitOptions;
export declare function createApp(options?: NodeRateLimitOptions | Record<string, unknown>): Server;
export declare function start(
  options?: NodeRateLimitOptions | Record<string, unknown>,
  listen?: { port?: number; host?: string },
): Promise<{ url: string; close(): Promise<void> }>;
