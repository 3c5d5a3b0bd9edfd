// The tool-boundary crash child (docs/spec/03-tool-boundary.md): runs one model tool call through ToolRuntime on a real store, with a
// Failpoints layer that prints "at <boundary>" and waits forever there; or re-drives the same call from a new process.
// Usage: node --import tsx harness/ToolChild.ts <sqlite|jsonl> <workspace> <boundary|delivered|redrive|redrive-broken>
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as Tool from "../src/Domain/Tool.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { CLEANUP_MARKER, HarnessStore, storeLayer } from "./Child.js"

/** The run the tool crash rows use. */
export const TOOL_RUN_ID = "tool-run"
/** The side-effect counter file in the workspace. */
export const COUNTER_FILE = "side-effect-counter"
/** What the child is asked to do: crash at a boundary, deliver and wait, or re-drive (correctly or broken). */
export const ToolChildMode = Schema.Literal(...Failpoints.TOOL_BOUNDARIES, "delivered", "redrive", "redrive-broken")
/** What the child is asked to do. */
export type ToolChildMode = typeof ToolChildMode.Type

/** The run's fixed events: the opener, the user message and the model's tool call (same ids in every process). */
export const toolRunEvents = () => {
  const b = EventBuilder.make(TOOL_RUN_ID, 0)
  return { runId: b.runId, opened: b.opened("t1_after_preflight_v1"), user: b.user("count once"), call: b.call("call-1", "Count", {}) }
}

/** The tool: reads the counter file, hits `in_implementation`, writes the counter + 1 (its side effect). */
export const counterTool = (workspace: string) =>
  Tool.make({
    name: "Count",
    args: Schema.Struct({}),
    recoveryMode: "never_auto_retry",
    implementation: (_args, ctx) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const file = resolve(workspace, COUNTER_FILE)
        const before = (yield* fs.exists(file)) ? Number(yield* fs.readFileString(file)) : 0
        yield* ctx.failpoint
        yield* fs.writeFileString(file, `${before + 1}`)
        return { count: before + 1 }
      }).pipe(Effect.orDie)
  })

const print = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const child = (store: HarnessStore, workspace: string, mode: ToolChildMode) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* Effect.addFinalizer(() => fs.writeFileString(resolve(workspace, CLEANUP_MARKER), `finalizer of ${mode} ran\n`).pipe(Effect.orDie))
    const ledger = yield* storeLayer(store, { workspace, readOnly: false }).pipe(Layer.build, Effect.map(Context.get(RuntimeEventStore)))
    const { call, opened, runId, user } = toolRunEvents()
    const tools = [counterTool(workspace)]
    const runtime = ToolRuntime.run(runId, call, { tools }).pipe(Effect.provideService(RuntimeEventStore, ledger))
    if (mode === "redrive" || mode === "redrive-broken") {
      const result = yield* Effect.either(runtime)
      if (result._tag === "Right") return yield* print(`result ${JSON.stringify(result.right.response.body)}`)
      const error = result.left
      // The deliberately broken runtime: it runs the implementation although T1 was refused.
      if (mode === "redrive-broken" && error._tag === "AppendRejected") {
        yield* tools[0]!.implementation({}, { operationId: "op_broken" as never, idempotencyKey: undefined, evidence: undefined, failpoint: Effect.void, failpointAt: () => Effect.void })
      }
      return yield* print(`refused ${error._tag} ${"reason" in error ? error.reason : "-"}`)
    }
    yield* ledger.append(runId, [opened, user])
    const failpoints = Failpoints.layerAt(mode as Failpoints.ToolBoundary, () =>
      Effect.zipRight(print(`at ${mode}`), Effect.never))
    const outcome = yield* runtime.pipe(Effect.provide(failpoints))
    // The result reaches "the model" (stdout) only now, after T2 committed.
    yield* print(`result ${JSON.stringify(outcome.response.body)}`)
    if (mode === "delivered") yield* print("at delivered")
    return yield* Effect.never
  }).pipe(Effect.scoped)

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const main = Schema.decodeUnknown(Schema.Tuple(HarnessStore, Schema.String, ToolChildMode))(process.argv.slice(2)).pipe(
    Effect.flatMap(([store, workspace, mode]) => child(store, workspace, mode)),
    Effect.provide(NodeLedgerFileSystem.layer),
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`)
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true })
}
