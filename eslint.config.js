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
  {
    // core stays pure: no I/O, no clock, no node:* modules.
    files: ["packages/ratekeeper/src/core/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["node:*", "../stores/*", "../http/*", "../adapters/*", "../limiter*"] }],
      "no-restricted-properties": ["error", { object: "Date", property: "now", message: "core takes the time as an argument" }],
    },
  },
  {
    // The simulator is pure too: traffic in, numbers out, on a virtual clock (the CLI draws and writes).
    files: ["packages/ratekeeper/src/simulate/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: ["node:*", "../stores/*", "../http/*", "../adapters/*"] }],
      "no-restricted-properties": ["error", { object: "Date", property: "now", message: "the simulator runs on the traffic's clock" }],
    },
  },
);
