// Startup repair killed halfway, for real (docs/spec/04-continuation.md: "if it is killed halfway and run again, the result is the same"):
// a child repairs a workspace of many runs and is SIGKILLed three times at growing progress, then repair runs to the end.
import { headerOf } from "./support/runHeaders.js"
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Layer, Option, Stream } from "effect"
import * as nodeFs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { DONE_LINE, REPAIRING_LINE } from "../harness/RepairChild.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as RepairWorkspace from "../src/Workspace/RepairWorkspace.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const CHILD = fileURLToPath(new URL("../harness/RepairChild.ts", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const INTERRUPTED = 150
const ABANDONED = 10
const LAGGING = 10
// Kill the child once this many interrupted runs have their RunTerminated on disk (three kills, growing progress).
const KILL_AT = [5, 50, 110]


const stores = (store: "sqlite" | "jsonl", workspace: string) =>
  RepairWorkspace.layerWorkspaceStores(store, { workspace, readOnly: false })

// How many repair-appended RunTerminated events are on disk now (read without any lock, as a bystander).
const terminatedOnDisk = (store: "sqlite" | "jsonl", workspace: string): number => {
  if (store === "jsonl") {
    const file = join(workspace, JsonlRuntimeEventStore.FILE_NAME)
    return (nodeFs.readFileSync(file, "utf8").match(/:repair:terminated"/g) ?? []).length
  }
  const db = new Database(join(workspace, SqliteRuntimeEventStore.FILE_NAME), { readonly: true })
  try {
    return (db.prepare("SELECT count(*) AS n FROM events WHERE event_id LIKE '%:repair:terminated'").get() as { n: number }).n
  } finally {
    db.close()
  }
}

// Starts a repair child, waits until `target` runs are sealed on disk (or the child ends), then SIGKILLs it.
const killAt = (store: "sqlite" | "jsonl", workspace: string, target: number) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD, store, workspace).pipe(
      Command.workingDirectory(ROOT),
      Command.start
    )
    const lines: Array<string> = []
    yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
    while (!lines.includes(REPAIRING_LINE)) yield* Effect.sleep("5 millis")
    while (!lines.includes(DONE_LINE) && terminatedOnDisk(store, workspace) < target) yield* Effect.sleep("1 millis")
    const finished = lines.includes(DONE_LINE)
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    return { finished, sealed: terminatedOnDisk(store, workspace) }
  }))

const check = (store: "sqlite" | "jsonl") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-repair-kill-${store}-` })
    const interrupted = Array.from({ length: INTERRUPTED }, (_, i) => EventBuilder.make(`int-${i}`))
    const abandoned = Array.from({ length: ABANDONED }, (_, i) => EventBuilder.make(`abn-${i}`))
    const lagging = Array.from({ length: LAGGING }, (_, i) => EventBuilder.make(`lag-${i}`))
    yield* Effect.scoped(Effect.gen(function*() {
      const ledger = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      yield* ledger.appendBatch(interrupted.map((b) => ({ runId: b.runId, events: [b.opened(), b.user("hello"), b.model("working")] })))
      yield* ledger.appendBatch(lagging.map((b) => ({ runId: b.runId, events: [b.opened(), b.user("hi"), b.terminated("completed")] })))
      for (const b of [...interrupted, ...lagging]) yield* headers.create(headerOf(b, "running"))
      for (const b of abandoned) yield* headers.create(headerOf(b, "created"))
    }).pipe(Effect.provide(stores(store, workspace))))

    // Three real kills at growing progress: each leaves a partly repaired workspace (perhaps a run sealed in the
    // ledger whose header was not updated yet), and each next child starts from it.
    const kills: Array<{ finished: boolean; sealed: number }> = []
    for (const target of KILL_AT) kills.push(yield* killAt(store, workspace, target))
    const midway = kills.filter((k) => !k.finished && k.sealed > 0 && k.sealed < INTERRUPTED)
    assert.isAtLeast(midway.length, 1, `no kill landed halfway: ${JSON.stringify(kills)}`)

    // Repair to the end, then once more: the second pass finds nothing to do.
    const owner = Layer.mergeAll(NodeWorkspaceLock.layerNode, NodeWorkspaceOwner.layerNode)
    const last = yield* RepairWorkspace.repairWorkspace({ workspace, store }).pipe(Effect.provide(owner))
    assert.deepStrictEqual(last.report.failed, [])
    const again = yield* RepairWorkspace.repairWorkspace({ workspace, store }).pipe(Effect.provide(owner))
    assert.deepStrictEqual(again.report.repaired, [])
    assert.strictEqual(again.report.alreadyTerminal, INTERRUPTED + ABANDONED + LAGGING)

    // The same end state an uninterrupted repair reaches, run by run.
    yield* Effect.scoped(Effect.gen(function*() {
      const ledger = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      for (const b of interrupted) {
        const rows = yield* ledger.readRun(b.runId)
        const terminated = rows.filter((r) => r.event.body._tag === "RunTerminated")
        assert.strictEqual(terminated.length, 1, b.runId)
        assert.deepStrictEqual([rows.length, rows[3]!.event.id], [4, StartupRepair.terminatedEventId(b.runId)], b.runId)
        const header = Option.getOrThrow(yield* headers.get(b.runId))
        assert.deepStrictEqual([header.status, header.statusReason], ["failed", "process_interrupted"], b.runId)
      }
      for (const b of abandoned) {
        assert.isTrue(Option.isNone(yield* Effect.option(ledger.highWater(b.runId))), b.runId)
        const header = Option.getOrThrow(yield* headers.get(b.runId))
        assert.deepStrictEqual([header.status, header.statusReason], ["failed", "continuation_abandoned_before_provider_call"])
      }
      for (const b of lagging) {
        assert.strictEqual((yield* ledger.highWater(b.runId)).seq, 3)
        assert.strictEqual(Option.getOrThrow(yield* headers.get(b.runId)).status, "completed")
      }
    }).pipe(Effect.provide(stores(store, workspace))))
  }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(NodeContext.layer, NodeWorkspaceLock.layerNode)))

describe("startup repair killed halfway (real SIGKILL), then run again", () => {
  it.live("SQLite: three kills at growing progress, then one repair: every run ends as an uninterrupted repair leaves it", () =>
    check("sqlite"), 120_000)
  it.live("JSONL: three kills at growing progress, then one repair: every run ends as an uninterrupted repair leaves it", () =>
    check("jsonl"), 120_000)
})
