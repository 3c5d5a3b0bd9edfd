// The demo's host child (docs/reliability.md, `runtime-resume demo`): starts a host on a workspace, opens one managed turn (header,
// RunOpened, the user message), runs the model's tool call through ToolRuntime, and waits at a tool failpoint to be SIGKILLed.
// Usage: node --import tsx harness/DemoChild.ts <sqlite|jsonl> <workspace> <in_implementation|after_t2> <content JSON>
import * as CapturingTracer from "../src/Testing/CapturingTracer.js"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as Tool from "../src/Domain/Tool.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as HostStartup from "../src/Programs/HostStartup.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

/** The demo turn's run id (its session, invocation and turn follow `EventBuilder.idsFor`). */
export const DEMO_RUN_ID = "demo-turn"
/** The model's tool call id in the demo turn. */
export const DEMO_CALL_ID = "call-1"
/** The demo's one tool. */
export const DEMO_TOOL_NAME = "WriteNote"
/** The file the tool writes in the workspace: its side effect. */
export const NOTE_FILE = "demo-note.txt"

/** The stores the demo can run on. */
export const DemoStore = Schema.Literal("sqlite", "jsonl")
/** A store the demo can run on. */
export type DemoStore = typeof DemoStore.Type

/** Where the child stops to be killed: in the tool's implementation (story A), or after T2 committed (story B). */
export const CrashPoint = Schema.Literal("in_implementation", "after_t2")
/** Where the child stops to be killed. */
export type CrashPoint = typeof CrashPoint.Type

/** The turn's content, which only the ledger may hold: the prompt, the tool's note argument and its result text. */
export const TurnContent = Schema.Struct({ prompt: Schema.String, note: Schema.String, result: Schema.String })
/** The turn's content. */
export type TurnContent = typeof TurnContent.Type

/** The line the child prints on stdout when it has reached its crash point. */
export const atLine = (point: CrashPoint): string => `at ${point}`

/** The ledger and the run headers of a workspace, of one kind, opened as a reader or a writer. */
export const workspaceStores = (store: DemoStore, options: { readonly workspace: string; readonly readOnly: boolean }) =>
  Layer.merge(
    NodeRuntimeEventStore.layerStore(store, options),
    store === "sqlite" ? SqliteRunHeaderStore.layer(options) : JsonlRunHeaderStore.layer(options)
  )

/** The demo's tool: writes the note into `<workspace>/demo-note.txt` (after the `in_implementation` failpoint), returns the result text. */
export const noteTool = (workspace: string, resultText: string) =>
  Tool.make({
    name: DEMO_TOOL_NAME,
    args: Schema.Struct({ note: Schema.String }),
    recoveryMode: "never_auto_retry",
    implementation: (args, ctx) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* ctx.failpoint
        yield* fs.writeFileString(resolve(workspace, NOTE_FILE), args.note)
        return { text: resultText }
      }).pipe(Effect.orDie)
  })

const print = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

// Every log line on stderr (message, annotations, spans): the parent keeps them for the canary check.
const stderrLogger = Logger.make(({ annotations, cause, logLevel, message, spans }) => {
  process.stderr.write(
    `log ${logLevel.label} ${JSON.stringify(message)} ${JSON.stringify([...HashMap.toEntries(annotations)])} ` +
      `${JSON.stringify(List.toArray(spans).map((s) => s.label))}${Cause.isEmpty(cause) ? "" : ` ${Cause.pretty(cause)}`}\n`
  )
})

// Every ended span on stderr (name, attributes, events, exit): the parent keeps them for the canary check.
const stderrTracer: Tracer.Tracer = CapturingTracer.make((line) => void process.stderr.write(`${line}\n`))

/**
 * The host: ensures the workspace identity, starts under the owner lock (startup repair, then the shared hold for its
 * lifetime), creates the turn's header, commits RunOpened (`t1_after_preflight_v1`) and the user message, sets the
 * header `running`, then runs the model's tool call through ToolRuntime; at `point` it prints `at <point>` and waits.
 */
export const child = (store: DemoStore, workspace: string, point: CrashPoint, content: TurnContent) =>
  Effect.gen(function*() {
    const workspaceId = yield* WorkspaceIdentity.ensure(workspace)
    const stores = yield* Layer.build(workspaceStores(store, { workspace, readOnly: false }))
    const started = yield* HostStartup.start(workspace, { repair: Effect.provide(StartupRepair.repair, stores) })
    yield* Effect.logInfo("demo.host_started").pipe(Effect.annotateLogs({ repair: started.repair._tag }))
    const ledger = Context.get(stores, RuntimeEventStore)
    const headers = Context.get(stores, RunHeaderStore)
    const ts = yield* Clock.currentTimeMillis
    const b = EventBuilder.make(DEMO_RUN_ID, ts)
    const runId = b.runId
    const call = b.call(DEMO_CALL_ID, DEMO_TOOL_NAME, { note: content.note })
    yield* headers.create(
      new RunHeader({
        runId,
        sessionId: call.sessionId,
        invocationId: call.invocationId,
        turnId: call.turnId,
        status: "created",
        workspaceId,
        createdAt: ts,
        updatedAt: ts
      })
    )
    yield* ledger.append(runId, [b.opened("t1_after_preflight_v1"), b.user(content.prompt)])
    yield* headers.setStatus(runId, "running", { at: ts })
    yield* Effect.logInfo("demo.turn_running").pipe(Effect.annotateLogs({ runId, callId: DEMO_CALL_ID }))
    const failpoints = Failpoints.layerAt(point, (site) =>
      Effect.logInfo("demo.crash_point").pipe(
        Effect.annotateLogs({ point, runId: site.runId, operationId: site.operationId }),
        Effect.zipRight(print(atLine(point))),
        Effect.zipRight(Effect.never)
      ))
    yield* ToolRuntime.run(runId, call, { tools: [noteTool(workspace, content.result)] }).pipe(
      Effect.provide(failpoints),
      Effect.provideService(RuntimeEventStore, ledger),
      Effect.withSpan("DemoChild.toolCall", { attributes: { runId, callId: DEMO_CALL_ID } })
    )
    // Every crash point comes before this: reaching it means the failpoint did not stop the child.
    return yield* Effect.dieMessage(`the demo child passed its crash point ${point} without stopping`)
  }).pipe(Effect.scoped, Effect.withSpan("DemoChild.host", { attributes: { point } }))

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = Schema.Tuple(DemoStore, Schema.String.pipe(Schema.minLength(1)), CrashPoint, Schema.parseJson(TurnContent))
  const lock = NodeWorkspaceLock.layer.pipe(Layer.provide(NodeLedgerFileSystem.layer))
  const main = Schema.decodeUnknown(args)(process.argv.slice(2)).pipe(
    Effect.flatMap(([store, workspace, point, content]) => child(store, workspace, point, content)),
    Effect.provide(Layer.mergeAll(NodeLedgerFileSystem.layer, lock, NodeWorkspaceOwner.layer).pipe(
      Layer.provide(lock),
      Layer.provide(NodeLedgerFileSystem.layer)
    )),
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(
          `${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`
        )
      })
    ),
    Effect.withTracer(stderrTracer),
    Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
    Logger.withMinimumLogLevel(LogLevel.All)
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
}
