// Types of app.js, for the TypeScript tests that use it.
import type { Hono } from "hono";
import type { HonoRateLimitOptions } from "ratekeeper/hono";
export declare const defaultOptions: HonoRateLimitOptions;
export declare function createApp(options?: HonoRateLimitOptions | Record<string, unknown>): Hono;
