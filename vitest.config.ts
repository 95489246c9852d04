import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Suites that start their own redis-server / nginx / service processes run in parallel files;
    // two cores: keep the fan-out modest.
    maxWorkers: 2,
  },
});
