// Startup repair (docs/spec/04-continuation.md) over the memory stores and over real SQLite and JSONL workspaces: each row of 04's table,
// unmanaged runs left alone, an unreadable ledger reported and untouched, and convergence after a repair killed between its writes.
import { headerOf } from "./support/runHeaders.js"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Layer, Option } from "effect"
import { RunId } from "../src/Domain/Ids.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"


// One workspace of every kind the repair meets: an interrupted run, an abandoned continuation (header, no events), a
// run whose terminal event landed without its header, an unmanaged run, and a run already closed.
const seed = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const interrupted = EventBuilder.make("interrupted")
  yield* store.append(interrupted.runId, [interrupted.opened(), interrupted.user("hello"), interrupted.model("working")])
  yield* headers.create(headerOf(interrupted))
  const abandoned = EventBuilder.make("abandoned")
  yield* headers.create(headerOf(abandoned, "created"))
  const lagging = EventBuilder.make("lagging")
  yield* store.append(lagging.runId, [lagging.opened(), lagging.user("hi"), lagging.terminated("completed")])
  yield* headers.create(headerOf(lagging))
  const unmanaged = EventBuilder.make("unmanaged")
  yield* store.append(unmanaged.runId, [unmanaged.opened(), unmanaged.user("imported")])
  const closed = EventBuilder.make("closed")
  yield* store.append(closed.runId, [closed.opened(), closed.terminated("cancelled")])
  yield* headers.create(headerOf(closed))
  yield* headers.setStatus(closed.runId, "cancelled", { at: 1 })
  return { interrupted, abandoned, lagging, unmanaged, closed }
})

// What a workspace holds after repair, as comparable data: every header's status and reason, every run's high-water.
const snapshot = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const out: Array<string> = []
  for (const h of yield* headers.list()) out.push(`header ${h.runId} ${h.status} ${h.statusReason ?? "-"}`)
  for (const runId of yield* store.listRuns()) {
    const hw = yield* store.highWater(runId)
    out.push(`run ${runId} ${hw.seq} ${hw.digest}`)
  }
  return out
})

const checkRepair = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const runs = yield* seed
  const before = yield* store.highWater(runs.unmanaged.runId)
  const report = yield* StartupRepair.repair
  assert.deepStrictEqual(
    report.repaired.map((r) => [r.runId, r.action, r.status, r.statusReason ?? "-", r.terminatedSeq ?? 0]),
    [
      ["interrupted", "interrupted_run_closed", "failed", "process_interrupted", 4],
      ["abandoned", "abandoned_continuation_closed", "failed", "continuation_abandoned_before_provider_call", 0],
      ["lagging", "header_caught_up", "completed", "-", 0]
    ]
  )
  assert.deepStrictEqual(report.unmanaged, [runs.unmanaged.runId])
  assert.strictEqual(report.alreadyTerminal, 1)
  assert.deepStrictEqual(report.failed, [])
  // The interrupted run was sealed at seq 4 with the repair's own event, failed / process_interrupted.
  const rows = yield* store.readRun(runs.interrupted.runId)
  const last = rows[rows.length - 1]!
  assert.strictEqual(last.seq, 4)
  assert.strictEqual(last.event.id, StartupRepair.terminatedEventId("interrupted"))
  assert.deepStrictEqual(last.event.body._tag === "RunTerminated" ? [last.event.body.status, last.event.body.failureClass] : [], [
    "failed",
    "process_interrupted"
  ])
  // Nothing was appended for the abandoned continuation, the lagging run or the unmanaged one.
  assert.isTrue(Option.isNone(yield* Effect.option(store.highWater(runs.abandoned.runId))))
  assert.strictEqual((yield* store.highWater(runs.lagging.runId)).seq, 3)
  assert.deepStrictEqual(yield* store.highWater(runs.unmanaged.runId), before)
  assert.isTrue(Option.isNone(yield* headers.get(runs.unmanaged.runId)))
  // Repair is idempotent: a second pass changes nothing and reports every managed run as terminal.
  const after = yield* snapshot
  const again = yield* StartupRepair.repair
  assert.deepStrictEqual(again.repaired, [])
  assert.strictEqual(again.alreadyTerminal, 4)
  assert.deepStrictEqual(yield* snapshot, after)
})

const memory = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer)

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-repair-" }))

const sqlite = (workspace: string) =>
  Layer.mergeAll(SqliteRuntimeEventStore.layer({ workspace }), SqliteRunHeaderStore.layer({ workspace })).pipe(
    Layer.provide(NodeFileSystem.layer)
  )

const jsonl = (workspace: string) =>
  Layer.mergeAll(JsonlRuntimeEventStore.layer({ workspace }), JsonlRunHeaderStore.layer({ workspace })).pipe(
    Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode))
  )

describe("StartupRepair", () => {
  it.effect("applies each row of docs/spec/04-continuation.md's table, leaves unmanaged and closed runs alone, and converges (memory)", () =>
    checkRepair.pipe(Effect.provide(memory)))

  it.scopedLive("does the same on a real SQLite workspace, and the result survives a reopen", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const repaired = yield* Effect.scoped(Effect.zipRight(checkRepair, snapshot).pipe(Effect.provide(sqlite(ws))))
      assert.deepStrictEqual(yield* Effect.scoped(snapshot.pipe(Effect.provide(sqlite(ws)))), repaired)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("does the same on a real JSONL workspace, and the result survives a reopen", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const repaired = yield* Effect.scoped(Effect.zipRight(checkRepair, snapshot).pipe(Effect.provide(jsonl(ws))))
      assert.deepStrictEqual(yield* Effect.scoped(snapshot.pipe(Effect.provide(jsonl(ws)))), repaired)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("a repair killed between its append and its header update converges to the same state when run again", () =>
    Effect.gen(function*() {
      // The uninterrupted repair of one interrupted run...
      const whole = yield* Effect.gen(function*() {
        const b = EventBuilder.make("interrupted")
        yield* (yield* RuntimeEventStore).append(b.runId, [b.opened(), b.user("hello")])
        yield* (yield* RunHeaderStore).create(headerOf(b))
        yield* StartupRepair.repair
        return yield* snapshot
      }).pipe(Effect.provide(memory))
      // ...and one killed after its append: the RunTerminated it writes is in the ledger, the header still running.
      const resumed = yield* Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        const b = EventBuilder.make("interrupted")
        yield* store.append(b.runId, [b.opened(), b.user("hello")])
        yield* (yield* RunHeaderStore).create(headerOf(b))
        yield* store.append(b.runId, [
          b.custom(b.terminated("failed", StartupRepair.INTERRUPTED).body, { id: StartupRepair.terminatedEventId("interrupted") })
        ])
        const report = yield* StartupRepair.repair
        assert.deepStrictEqual(report.repaired.map((r) => r.action), ["header_caught_up"])
        return yield* snapshot
      }).pipe(Effect.provide(memory))
      assert.deepStrictEqual(resumed, whole)
      assert.include(whole, "header interrupted failed process_interrupted")
    }))

  it.scopedLive("an unreadable ledger (a flipped byte in SQLite) is reported and left exactly as it was", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const b = EventBuilder.make("tampered")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* (yield* RuntimeEventStore).append(b.runId, [b.opened(), b.user("hello"), b.model("world")])
        yield* (yield* RunHeaderStore).create(headerOf(b))
      }).pipe(Effect.provide(sqlite(ws))))
      const file = `${ws}/${SqliteRuntimeEventStore.FILE_NAME}`
      const db = new Database(file)
      const { bytes } = db.prepare("SELECT bytes FROM events WHERE run_id = ? AND seq = 2").get("tampered") as { bytes: Buffer }
      const flipped = Buffer.from(bytes)
      flipped[flipped.length - 3] = flipped[flipped.length - 3]! ^ 1
      db.prepare("UPDATE events SET bytes = ? WHERE run_id = ? AND seq = 2").run(flipped, "tampered")
      const before = db.prepare("SELECT run_id, seq, digest, bytes FROM events ORDER BY pos").all()
      db.close()
      const report = yield* Effect.scoped(StartupRepair.repair.pipe(Effect.provide(sqlite(ws))))
      assert.deepStrictEqual(report.repaired, [])
      assert.deepStrictEqual(report.failed.map((f) => [f.runId, f.error, f.reason]), [["tampered", "LedgerCorruption", "digest_mismatch"]])
      const reopened = new Database(file, { readonly: true })
      assert.deepStrictEqual(reopened.prepare("SELECT run_id, seq, digest, bytes FROM events ORDER BY pos").all(), before)
      reopened.close()
      const header = yield* Effect.scoped(
        Effect.flatMap(RunHeaderStore, (h) => h.get(RunId.make("tampered"))).pipe(Effect.provide(sqlite(ws)))
      )
      assert.strictEqual(Option.getOrThrow(header).status, "running")
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
