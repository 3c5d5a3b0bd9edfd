import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// Tests import the package by name ("runtime-resume", "/promise", "/test", "/postgres", "/mcp"): run them against src/, not dist/.
const source = (file: string) => fileURLToPath(new URL(`./src/${file}`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^runtime-resume$/, replacement: source("index.ts") },
      { find: /^runtime-resume\/promise$/, replacement: source("Promise.ts") },
      { find: /^runtime-resume\/test$/, replacement: source("Testing.ts") },
      { find: /^runtime-resume\/postgres$/, replacement: source("Postgres.ts") },
      { find: /^runtime-resume\/mcp$/, replacement: source("Mcp.ts") }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    // The CLI tests spawn bin/runtime-resume, which runs dist/: rebuilt here when the sources are newer.
    // One PostgreSQL server for the whole run (or RUNTIME_RESUME_TEST_PG_URL): test/support/pgGlobalSetup.ts.
    globalSetup: ["test/support/buildDist.ts", "test/support/pgGlobalSetup.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2
  }
})
