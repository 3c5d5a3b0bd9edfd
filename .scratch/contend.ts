import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import { detectStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import * as Data from "../src/Console/internal/data.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
const ws = process.argv[2]!
const withStores = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(detectStore(ws, undefined), (store) => Effect.provide(effect, layerWorkspaceStores(store, { workspace: ws, readOnly: true })))
const t = () => performance.now()
const T0 = t()
const step = (name: string, e: Effect.Effect<any, any, any>) => Effect.gen(function*() { const t0 = t(); yield* e; console.log(((t()-T0)/1000).toFixed(1), name, (t() - t0).toFixed(0), "ms") })
Effect.runPromise(Effect.gen(function*() {
  yield* Effect.forkDaemon(step("SUMMARY", withStores(Data.runSummary("run-large", Data.makeCaches()))))
  for (let i = 0; i < 12; i++) {
    yield* Effect.sleep("3 seconds")
    yield* step("detect", detectStore(ws, undefined))
    yield* step("open", withStores(Effect.void))
    yield* step("glance", withStores(Effect.all([Data.runGlance("run-large"), Data.eventPage("run-large", 5000), Data.highWaters])))
  }
}).pipe(Effect.provide(NodeWorkspaceLock.layer), Effect.provide(NodeContext.layer))).then(() => process.exit(0))
