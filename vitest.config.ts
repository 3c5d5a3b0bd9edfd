import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// Tests import the package by name ("runtime-resume", "/promise", "/test"): run them against src/, not dist/.
const source = (file: string) => fileURLToPath(new URL(`./src/${file}`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^runtime-resume$/, replacement: source("index.ts") },
      { find: /^runtime-resume\/promise$/, replacement: source("Promise.ts") },
      { find: /^runtime-resume\/test$/, replacement: source("Testing.ts") }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    // The CLI tests spawn bin/runtime-resume, which runs dist/: rebuilt here when the sources are newer.
    globalSetup: ["test/support/buildDist.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2
  }
})
