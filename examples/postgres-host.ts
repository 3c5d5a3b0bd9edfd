// The README's two-host set-up: run this same program on two machines with the same RUNTIME_RESUME_PG_URL; both append
// to workspace "support_bot" at once, each holding the owner lock shared for its life (released if it dies).
import { Effect } from "effect"
import { EventBuilder, RuntimeEventStore, WorkspaceOwner } from "runtime-resume"
import { PgWorkspace } from "runtime-resume/postgres"

// The ledger, run headers and owner lock of workspace "support_bot", over one pool, URL from RUNTIME_RESUME_PG_URL.
const Workspace = PgWorkspace.layerConfig("support_bot")

const host = Effect.gen(function*() {
  const owner = yield* WorkspaceOwner.WorkspaceOwner
  yield* owner.acquire("support_bot", "shared")
  const store = yield* RuntimeEventStore.RuntimeEventStore
  const b = EventBuilder.make(`run-${process.pid}`, Date.now())
  yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("hello")])
  yield* Effect.log(`appended to ${b.runId}`)
}).pipe(Effect.scoped, Effect.provide(Workspace))

Effect.runPromise(host).catch((error) => {
  console.error(String(error))
  process.exit(2)
})
