// A minimal agent host on runtime-resume: workspace identity, startup under the owner lock (startup repair), one managed
// turn (run header + `t1_after_preflight_v1` opener), a tool call through ToolRuntime, then the turn's end and its plan.
// Run: npx tsx examples/host.ts [workspace] [--crash]   (--crash: SIGKILL inside the tool; run again to see the repair)
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as FileSystem from "@effect/platform/FileSystem"
import { Clock, Console, Effect, Layer, Schema } from "effect"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  decide,
  HostStartup,
  Ids,
  planResume,
  RunHeader,
  RunHeaderStore,
  RuntimeEvent,
  RuntimeEventStore,
  StartupRepair,
  Tool,
  ToolFailpoints,
  ToolRuntime,
  WorkspaceIdentity,
  WorkspaceOwner
} from "runtime-resume"

// 1. Tools are data: a name, an args Schema, a recovery mode and an implementation. `never_auto_retry`: after a crash
//    in the middle, only a person decides (the plan blocks); `read_only`/`idempotent` tools may be re-run.
const saveNote = (workspace: string) =>
  Tool.make({
    name: "save_note",
    args: Schema.Struct({ file: Schema.String.pipe(Schema.pattern(/^[a-z0-9-]+\.txt$/)), text: Schema.String }),
    recoveryMode: "never_auto_retry",
    implementation: (args, context) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* context.failpoint // where a test (or --crash) may kill the process
        yield* fs.writeFileString(Path.join(workspace, args.file), args.text)
        return { saved: args.file, operationId: context.operationId }
      }).pipe(Effect.orDie)
  })

// 2. Events: the host builds every RuntimeEvent with its own branded ids (`Ids.X.make` validates and brands).
const turnEvents = (ids: { runId: Ids.RunId; sessionId: Ids.SessionId; invocationId: Ids.InvocationId; turnId: Ids.TurnId }) => {
  let n = 0
  return (ts: number, body: RuntimeEvent.EventBody) =>
    new RuntimeEvent.RuntimeEvent({ id: Ids.EventId.make(`${ids.runId}:${++n}`), ...ids, ts, body })
}

// 3. One managed turn: the header first (status `created`), then the opener declaring the T1/T2 tool boundary and the
//    user message, header `running`, the model's tool call through ToolRuntime, the model's text and RunTerminated,
//    and the terminal header last (the terminal event is always committed before the terminal header).
const runTurn = (workspace: string, workspaceId: string, prompt: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore.RuntimeEventStore
    const headers = yield* RunHeaderStore.RunHeaderStore
    const name = Crypto.randomUUID()
    const ids = {
      runId: Ids.RunId.make(`run-${name}`),
      sessionId: Ids.SessionId.make("session-1"),
      invocationId: Ids.InvocationId.make(`inv-${name}`),
      turnId: Ids.TurnId.make(`turn-${name}`)
    }
    const event = turnEvents(ids)
    const ts = yield* Clock.currentTimeMillis
    yield* headers.create(new RunHeader.RunHeader({ ...ids, status: "created", workspaceId, createdAt: ts, updatedAt: ts }))
    yield* store.append(ids.runId, [
      event(ts, new RuntimeEvent.RunOpened({ toolBoundary: "t1_after_preflight_v1" })),
      event(ts, new RuntimeEvent.UserMessage({ text: prompt }))
    ])
    yield* headers.setStatus(ids.runId, "running", { at: ts })

    // The model answers with a tool call (a real host gets it from its provider). ToolRuntime runs preflight, commits
    // the call and its ToolDispatched (T1), runs the implementation, commits the response (T2), then returns it.
    const call = event(ts, new RuntimeEvent.FunctionCall({
      callId: Ids.CallId.make("call-1"),
      name: "save_note",
      args: { file: "note.txt", text: prompt }
    }))
    const outcome = yield* ToolRuntime.run(ids.runId, call, {
      tools: [saveNote(workspace)],
      permission: ({ tool }) => Effect.succeed(tool.name === "save_note" ? "allow" : "deny")
    })
    const body = outcome.response.body as RuntimeEvent.FunctionResponse
    yield* Console.log(`turn ${ids.runId}: ${outcome._tag} ${JSON.stringify(body.result)}`)

    const end = yield* Clock.currentTimeMillis
    yield* store.append(ids.runId, [
      event(end, new RuntimeEvent.ModelText({ text: "Saved." })),
      event(end, new RuntimeEvent.RunTerminated({ status: "completed" }))
    ])
    yield* headers.setStatus(ids.runId, "completed", { at: end })
    return ids.runId
  })

// 4. The plan of a run, read back page by page from the store (verified as it is read).
const showPlan = (runId: Ids.RunId) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore.RuntimeEventStore
    const plan = yield* planResume(store.readRunPages(runId, 1000))
    const operations = plan.operations.map((op) => `${op.name} ${op.status}`).join(", ")
    yield* Console.log(`plan ${runId}: ${plan.decision} (${decide(plan)}); operations: ${operations || "none"}`)
  })

// 5. The host: the workspace identity, then HostStartup — startup repair under the exclusive owner lock (closing any
//    run a crash left open), then the lock held shared for the host's lifetime (the scope) — then its turns.
const host = (workspace: string, crash: boolean) =>
  Effect.gen(function*() {
    const workspaceId = yield* WorkspaceIdentity.ensure(workspace)
    yield* Console.log(`workspace ${workspace} (identity ${workspaceId})`)
    const started = yield* HostStartup.start(workspace, { repair: StartupRepair.repair })
    if (started.repair._tag === "Skipped") {
      yield* Console.log(`startup repair skipped: ${started.repair.reason}`)
    } else {
      const report = started.repair.result
      yield* Console.log(
        `startup repair: ${report.repaired.length} repaired, ${report.failed.length} failed, ` +
          `${report.unmanaged.length} unmanaged, ${report.alreadyTerminal} already terminal`
      )
      for (const run of report.repaired) {
        yield* Console.log(`  ${run.runId}: ${run.action}`)
        yield* showPlan(run.runId)
      }
    }
    const runId = yield* runTurn(workspace, workspaceId, "hello from the host").pipe(
      // --crash: die inside the tool's implementation, after T1 committed; the next start repairs the run.
      Effect.provide(crash ? ToolFailpoints.layerAt("in_implementation", () => Effect.sync(() => process.kill(process.pid, "SIGKILL"))) : Layer.empty)
    )
    yield* showPlan(runId)
  }).pipe(Effect.scoped)

// 6. Layers: the SQLite ledger and run headers of the workspace, the OS-level owner lock, Node's FileSystem.
const args = process.argv.slice(2)
const workspace = Path.resolve(args.find((a) => !a.startsWith("--")) ?? Path.join(Os.tmpdir(), `rr-host-${process.pid}`))
const layer = Layer.mergeAll(
  RuntimeEventStore.layerSqlite({ workspace }),
  RunHeaderStore.layerSqlite({ workspace }),
  WorkspaceOwner.layerNode
).pipe(Layer.provideMerge(NodeFileSystem.layer))

Effect.runPromise(
  host(workspace, args.includes("--crash")).pipe(
    Effect.provide(layer),
    // Typed errors (a locked workspace, a corrupt ledger, …) print one line; no stack trace.
    Effect.catchAll((error) => Effect.sync(() => {
      console.error(`${error._tag}: ${error.message}`)
      process.exitCode = 2
    }))
  )
)
