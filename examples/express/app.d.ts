// Types of app.js, for the TypeScript tests that start it.
import type { Express } from "express";
import type { ExpressRateLimitOptions } from "ratekeeper/express";
export declare const defaultOptions: ExpressRateLimitOptions;
export declare function createApp(options?: ExpressRateLimitOptions | Record<string, unknown>): Express;
export declare function start(
  options?: ExpressRateLimitOptions | Record<string, unknown>,
  listen?: { port?: number; host?: string },
): Promise<{ url: string; close(): Promise<void> }>;
