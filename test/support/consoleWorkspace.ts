// Workspaces for the recovery console's tests: a crashed run (an indeterminate write), a completed run, a chat-only
// run, written through the real SQLite store; and a generated large run for measuring the run page.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvocationId, RunId, SessionId, TurnId } from "../../src/Domain/Ids.js"
import { RunHeader } from "../../src/Domain/RunHeader.js"
import type { RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import { layerStore } from "../../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import { RunHeaderStore } from "../../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import { MARKER_FILE_NAME } from "../../src/Services/WorkspaceIdentity.js"
import { layerWorkspaceStores } from "../../src/Workspace/RepairWorkspace.js"

/** The secret the crashed run's tool call carries: it must never appear in a log or a page other than the event's. */
export const SECRET_ARG = "s3cr3t-argument-value"

const seed = (workspace: string, runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>) =>
  Effect.gen(function*() {
    const ledger = yield* RuntimeEventStore
    for (const events of runs) {
      for (let i = 0; i < events.length; i += 5000) {
        const chunk = events.slice(i, i + 5000)
        yield* ledger.appendBatch([{ runId: RunId.make(chunk[0]!.runId), events: chunk }], { mode: "restore" })
      }
    }
  }).pipe(
    Effect.provide(layerStore("sqlite", { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
    Effect.scoped
  )

/** The three runs of the console's workspace. */
export const threeRuns = (): ReadonlyArray<ReadonlyArray<RuntimeEvent>> => {
  const crashed = EventBuilder.make("run-crashed", 5)
  const completed = EventBuilder.make("run-completed", 6)
  const chat = EventBuilder.make("run-chat", 7)
  return [
    [
      crashed.opened("t1_after_preflight_v1"),
      crashed.user("write the report"),
      crashed.call("w1", "Write", { path: "report.txt", token: SECRET_ARG }),
      crashed.dispatched("w1", "Write", { path: "report.txt", token: SECRET_ARG }, "never_auto_retry"),
      crashed.terminated("failed", "process_interrupted")
    ],
    [
      completed.opened("t1_after_preflight_v1"),
      completed.user("run ls"),
      completed.call("c1", "Bash", { command: "ls" }),
      completed.dispatched("c1", "Bash", { command: "ls" }, "read_only"),
      completed.response("c1", "Bash", { stdout: "a\n" }),
      completed.model("done"),
      completed.terminated("completed")
    ],
    [chat.opened(), chat.user("hello"), chat.model("hi")]
  ]
}

/** A run of about `events` events: tool calls answered in turn, a last one left indeterminate, then sealed. */
export const largeRun = (events: number): ReadonlyArray<RuntimeEvent> => {
  const b = EventBuilder.make("run-large", 9)
  const out: Array<RuntimeEvent> = [b.opened("t1_after_preflight_v1"), b.user("go")]
  let k = 0
  while (out.length < events - 4) {
    const id = `c${k++}`
    out.push(b.call(id, "Bash", { k }), b.dispatched(id, "Bash", { k }, "read_only"), b.response(id, "Bash", { ok: k }))
  }
  out.push(b.call("last", "Write", { k }), b.dispatched("last", "Write", { k }, "never_auto_retry"))
  out.push(b.terminated("failed", "process_interrupted"))
  return out
}

/** The workspace identity the managed test workspaces carry. */
export const TEST_WORKSPACE_ID = "00000000-0000-4000-8000-00000000c0de"

// A run header for a run as a host writes it (its first event's ids), with the status its terminal event gives
// (`running` while open); written `running` first, then moved on, as a host does.
const seedHeaders = (workspace: string, runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>, store: "sqlite" | "jsonl") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(`${workspace}/${MARKER_FILE_NAME}`, `${TEST_WORKSPACE_ID}\n`)
    const headers = yield* RunHeaderStore
    for (const events of runs) {
      const first = events[0]!
      const terminal = events.map((e) => e.body).find((b) => b._tag === "RunTerminated")
      yield* headers.create(new RunHeader({
        runId: RunId.make(first.runId),
        sessionId: SessionId.make(first.sessionId),
        invocationId: InvocationId.make(first.invocationId),
        turnId: TurnId.make(first.turnId),
        status: "running",
        workspaceId: TEST_WORKSPACE_ID,
        createdAt: 1,
        updatedAt: 1
      }))
      if (terminal !== undefined && terminal._tag === "RunTerminated") {
        yield* headers.setStatus(RunId.make(first.runId), terminal.status, {
          at: 2,
          ...(terminal.failureClass === "process_interrupted" ? { reason: "process_interrupted" as const } : {})
        })
      }
    }
  }).pipe(
    Effect.provide(layerWorkspaceStores(store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
    Effect.scoped
  )

/**
 * A fresh temporary workspace (removed with the scope) holding `runs` in SQLite; `managed`: each run with its header
 * (as a host that manages its runs writes it), else none (unmanaged runs).
 */
export const workspaceWith = (runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>, options: { readonly managed?: boolean } = {}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-console-" })
    yield* seed(workspace, runs)
    if (options.managed === true) yield* seedHeaders(workspace, runs, "sqlite")
    return workspace
  })

/**
 * Run ids a person's host may well use and the ledger admits, each one a trap for a URL or a shell: path separators,
 * dot segments (plain and percent-encoded), quotes, markup, spaces, shell syntax, control characters, unicode.
 */
export const HOSTILE_IDS: ReadonlyArray<string> = [
  ".",
  "..",
  "...",
  "a/b",
  "/lead",
  "trail/",
  "a\\b",
  "..\\..",
  "../x",
  "x/..",
  "%2e%2e",
  "%2F",
  "~..",
  "~x",
  "sp ace",
  " lead",
  "q\"uo'te",
  "<b>&amp;",
  "ünï☃😀",
  "?#&=+",
  "r; touch PWNED",
  "$(id)",
  "`id`",
  "tab\tid",
  "new\nline"
]

/** A sealed run stuck on one indeterminate `never_auto_retry` write (a person decides), of run `runId`, call `callId`. */
export const stuckRun = (runId: string, callId: string = "w1"): ReadonlyArray<RuntimeEvent> => {
  const b = EventBuilder.make({ sessionId: "sess-hostile", invocationId: `inv-${runId}`, runId, turnId: `turn-${runId}` }, 3)
  return [
    b.opened("t1_after_preflight_v1"),
    b.user("write it"),
    b.call(callId, "Write", { path: "out.txt" }),
    b.dispatched(callId, "Write", { path: "out.txt" }, "never_auto_retry"),
    b.terminated("failed", "process_interrupted")
  ]
}
