// Types of app.js, for the TypeScript tests that start it.
import type { FastifyInstance } from "fastify";
import type { FastifyRateLimitOptions } from "ratekeeper/fastify";
export declare const defaultOptions: FastifyRateLimitOptions;
export declare function createApp(options?: FastifyRateLimitOptions | Record<string, unknown>): Promise<FastifyInstance>;
export declare function start(
  options?: FastifyRateLimitOptions | Record<string, unknown>,
  listen?: { port?: number; host?: string },
): Promise<{ app: FastifyInstance; url: string; close(): Promise<void> }>;
