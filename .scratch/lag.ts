import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import { detectStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import * as Data from "../src/Console/internal/data.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"

const ws = process.argv[2]!
const mode = process.argv[3]
const withStores = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(detectStore(ws, undefined), (store) => Effect.provide(effect, layerWorkspaceStores(store, { workspace: ws, readOnly: true })))
let last = performance.now(); let worst = 0; const lags: number[] = []
const iv = setInterval(() => { const now = performance.now(); const lag = now - last - 100; if (lag > worst) worst = lag; if (lag > 500) lags.push(Math.round(lag)); last = now }, 100)
const t0 = performance.now()
let e: any = withStores(Data.runSummary("run-large", Data.makeCaches()))
if (mode === "ws") e = withStores(Data.workspaceView)
Effect.runPromise(e.pipe(Effect.provide(NodeWorkspaceLock.layer), Effect.provide(NodeContext.layer))).then((s: any) => {
  clearInterval(iv); console.log(mode, "summary", ((performance.now() - t0) / 1000).toFixed(1), "s; worst lag", worst.toFixed(0), "ms; lags>500:", lags.slice(0, 30).join(","), "count", lags.length)
})
