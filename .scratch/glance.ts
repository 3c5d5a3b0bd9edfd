import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import { detectStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import * as Data from "../src/Console/internal/data.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
const ws = process.argv[2]!
const t = () => performance.now()
const timed = <A, E, R>(name: string, e: Effect.Effect<A, E, R>) => Effect.gen(function*() { const t0 = t(); const a = yield* e; console.log(name, (t() - t0).toFixed(1), "ms"); return a })
const withStores = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(detectStore(ws, undefined), (store) => Effect.provide(effect, layerWorkspaceStores(store, { workspace: ws, readOnly: true })))
Effect.runPromise(Effect.gen(function*() {
  yield* timed("open+nothing", withStores(Effect.void))
  yield* timed("open+glance", withStores(Data.runGlance("run-large")))
  yield* timed("open+glance2", withStores(Data.runGlance("run-large")))
  yield* timed("open+hw", withStores(Data.highWaters))
  yield* timed("open+eventPage", withStores(Data.eventPage("run-large", 5000)))
}).pipe(Effect.provide(NodeWorkspaceLock.layer), Effect.provide(NodeContext.layer))).catch((e) => console.error(e))
