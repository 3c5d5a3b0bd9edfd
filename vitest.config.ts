import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // One PostgreSQL server for the whole run (or RUNTIME_RESUME_TEST_PG_URL): test/support/pgGlobalSetup.ts.
    globalSetup: ["test/support/pgGlobalSetup.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2
  }
})
