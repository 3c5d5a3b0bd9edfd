// A host program as a consumer writes it: layers composed (SQLite events and headers, the owner lock), a managed turn
// appended, startup under HostStartup, the plan read. The consumer proof type-checks it strictly and runs it.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer } from "effect"
import {
  decide,
  EventBuilder,
  HostStartup,
  planResume,
  RunHeaderStore,
  RuntimeEventStore,
  StartupRepair,
  WorkspaceIdentity,
  WorkspaceOwner
} from "runtime-resume"

const workspace = process.argv[2] ?? "./ws"

// The ledger and the run headers in <workspace>/runtime.sqlite, the owner lock, over Node's FileSystem.
const stores = Layer.mergeAll(
  RuntimeEventStore.layerSqlite({ workspace }),
  RunHeaderStore.layerSqlite({ workspace })
)
const layer = Layer.mergeAll(stores, WorkspaceOwner.layerNode).pipe(Layer.provideMerge(NodeFileSystem.layer))

const program = Effect.gen(function*() {
  yield* WorkspaceIdentity.ensure(workspace)
  const started = yield* HostStartup.start(workspace, { repair: StartupRepair.repair })
  const store = yield* RuntimeEventStore.RuntimeEventStore
  const b = EventBuilder.make(`turn-${Date.now()}`)
  yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("hello"), b.call("c1", "Bash", { cmd: "ls" })])
  const plan = yield* planResume(store.readRunPages(b.runId, 1000))
  const word: string = decide(plan)
  console.log(`startup repair ${started.repair._tag}; plan ${plan.decision} ${word}`)
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(layer))).catch((error: unknown) => {
  console.error(`host failed: ${String(error)}`)
  process.exitCode = 2
})
