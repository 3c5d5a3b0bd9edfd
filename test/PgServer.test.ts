// The test server the globalSetup started (or RUNTIME_RESUME_TEST_PG_URL): it answers, and commits are durable.
// Under CI a missing server fails the run in the globalSetup itself, before any suite.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import pg from "pg"
import { inject } from "vitest"

describe("PostgreSQL test server", () => {
  it.live("answers on the URL the setup provided, with synchronous_commit on", () =>
    Effect.promise(async () => {
      const url = inject("pgUrl")
      assert.notStrictEqual(url, "", inject("pgUnavailable"))
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        const { rows } = await client.query("SHOW synchronous_commit")
        assert.strictEqual(rows[0].synchronous_commit, "on")
      } finally {
        await client.end()
      }
    }))
})
