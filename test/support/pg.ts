// Test helpers for the PostgreSQL suites: the server URL the globalSetup provided, and a fresh workspace name per
// folder (the suites written over a temp folder map each folder to its own workspace in the shared database).
import { createHash } from "node:crypto"
import { Effect, Redacted } from "effect"
import pg from "pg"
import { inject } from "vitest"

/** The test server's URL as the stores take it (a Redacted value). */
export const pgUrl = (): Redacted.Redacted<string> => Redacted.make(inject("pgUrl"))

/** The workspace name standing for a temp folder (a plain identifier, unique per folder). */
export const workspaceFor = (folder: string): string => `t_${createHash("sha256").update(folder).digest("hex").slice(0, 24)}`

/** A raw connection to the test server as its superuser (to tamper with rows as an attacker or a bad tool would), closed with the scope. */
export const rawClient = Effect.acquireRelease(
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: Redacted.value(pgUrl()) })
    await client.connect()
    return client
  }),
  (client) => Effect.promise(() => client.end())
)
