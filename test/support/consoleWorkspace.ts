// Workspaces for the recovery console's tests: a crashed run (an indeterminate write), a completed run, a chat-only
// run, written through the real SQLite store; and a generated large run for measuring the run page.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RunId } from "../../src/Domain/Ids.js"
import type { RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import { layerStore } from "../../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../../src/Programs/EventBuilder.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"

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

/** A fresh temporary workspace (removed with the scope) holding `runs` in SQLite. */
export const workspaceWith = (runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-console-" })
    yield* seed(workspace, runs)
    return workspace
  })
