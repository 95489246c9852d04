// Type-aware lint: floating promises and non-exhaustive switches are bugs in a rate limiter.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "**/.*/**", "coverage/**", "**/*.js", "**/*.mjs", "**/*.cjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: ["./tsconfig.test.json"], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    // A newcomer reads a source file whole and a function at a glance: at most ~350 lines a file
    // and 60 a function (its blank lines and comments not counted). The Lua sources are generated.
    files: ["packages/*/src/**/*.ts"],
    ignores: ["packages/ratekeeper/src/stores/redis/lua-sources.ts"],
    rules: {
      "max-lines": ["error", { max: 350 }],
      "max-lines-per-function": ["error", { max: 60, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Tests read JSON off the wire: untyped values are the point there. Promises and switches stay checked.
    files: ["packages/*/test/**/*.ts", "test-support/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/require-await": "off",
    },
  },
  // The layers (docs/architecture.md): each folder imports only the layers beneath it. A relative
  // import is matched by the folder or module it reaches, from any depth ("../../stores/memory.js").
  layer(
    "packages/ratekeeper/src/core/**/*.ts",
    ["stores", "http", "adapters", "simulate", "limiter"],
    "core is pure: no stores, no HTTP, no limiter",
    {
      node: true,
    },
  ),
  layer(
    "packages/ratekeeper/src/simulate/**/*.ts",
    ["stores", "http", "adapters", "limiter"],
    "the simulator runs the core on a virtual clock",
    {
      node: true,
    },
  ),
  layer(
    "packages/ratekeeper/src/stores/**/*.ts",
    ["http", "adapters", "simulate", "limiter"],
    "a store knows the core and the Store interface only",
  ),
  layer("packages/ratekeeper/src/limiter.ts", ["http", "adapters", "simulate"], "the limiter knows the core and the stores only"),
  layer("packages/ratekeeper/src/http/**/*.ts", ["stores", "adapters", "simulate"], "the HTTP layer reaches stores through the limiter"),
  layer(
    "packages/ratekeeper/src/adapters/**/*.ts",
    ["stores", "core", "limiter", "simulate"],
    "an adapter is thin: it imports the HTTP layer only",
  ),
  layer(
    "packages/server/src/config/**/*.ts",
    ["service", "overrides", "transport", "cli", "dashboard", "simulate"],
    "rules are read and compiled without the rest of the service",
    { server: true },
  ),
  layer(
    "packages/server/src/overrides/**/*.ts",
    ["service", "transport", "cli", "dashboard"],
    "overrides are a store: no transport, no command line",
    { server: true },
  ),
  layer("packages/server/src/service/**/*.ts", ["transport", "cli", "dashboard"], "decide() runs without any transport", { server: true }),
  layer("packages/server/src/dashboard/**/*.ts", ["transport", "cli"], "the dashboard is served by the transport, never the other way", {
    server: true,
  }),
  layer("packages/server/src/transport/**/*.ts", ["cli"], "the transports do not know the command line", { server: true }),
  layer(
    "packages/server/src/simulate/**/*.ts",
    ["service", "overrides", "transport", "cli", "dashboard", "config"],
    "the simulator report needs only the library",
    {
      server: true,
    },
  ),
  {
    files: ["packages/ratekeeper/src/core/**/*.ts"],
    rules: { "no-restricted-properties": ["error", { object: "Date", property: "now", message: "core takes the time as an argument" }] },
  },
  {
    files: ["packages/ratekeeper/src/simulate/**/*.ts"],
    rules: {
      "no-restricted-properties": ["error", { object: "Date", property: "now", message: "the simulator runs on the traffic's clock" }],
    },
  },
);

/**
 * A lint block that keeps `files` from importing the sibling folders (or modules) in `banned`.
 * `node`: no node:* modules either. `server`: the service uses the library's public entry
 * points only, never its files.
 */
function layer(files, banned, why, { node = false, server = false } = {}) {
  const patterns = [{ regex: `^(\\.\\.?/)+(${banned.join("|")})(/|\\.js$)`, message: `${why} (docs/architecture.md)` }];
  if (node) patterns.push({ regex: "^node:", message: `${why}: no I/O` });
  if (server) patterns.push({ regex: "(^|/)ratekeeper/(src|dist)/", message: "import the library by its public entry points" });
  return { files: [files], rules: { "no-restricted-imports": ["error", { patterns }] } };
}
