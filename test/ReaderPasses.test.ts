// Readers that prove what they read (docs/reliability.md, File hygiene): SQLite's derived rows checked against the events and rebuilt from them
// by `repair --rebuild-derived`; JSONL's verify and inspect reading the file once, whatever the number of runs.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodePath from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore, layerWorkspace } from "../src/Layers/NodeRuntimeEventStore.js"
import type { PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { rebuildDerivedWorkspace } from "../src/Workspace/RepairWorkspace.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const platform = Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)
const owner = NodeWorkspaceOwner.layer.pipe(Layer.provide(NodeWorkspaceLock.layerNode), Layer.provide(NodeLedgerFileSystem.layer))

const writer = (store: PersistentStore, workspace: string) => Layer.provide(layerStore(store, { workspace, readOnly: false }), platform)
const reader = (workspace: string) => Layer.provide(layerWorkspace({ workspace, readOnly: true }), platform)

const append = (store: PersistentStore, workspace: string, runId: string, events: ReadonlyArray<RuntimeEvent>) =>
  Effect.flatMap(RuntimeEventStore, (s) => s.append(RunId.make(runId), events)).pipe(
    Effect.provide(writer(store, workspace)),
    Effect.scoped
  )

describe("SQLite derived rows", () => {
  it.scopedLive("a wrong call-index row: verify fails naming the table and row; repair --rebuild-derived rebuilds it from the events (no event touched); a second FunctionResponse is then refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-derived-" })
      const x = EventBuilder.make("run-x")
      yield* append("sqlite", ws, "run-x", [x.opened(), x.user("go"), x.call("c1", "Bash", { command: "ls" }), x.response("c1", "Bash", { ok: 1 })])
      const file = NodePath.join(ws, "runtime.sqlite")
      const events = () => {
        const db = new Sqlite(file, { readonly: true })
        const rows = db.prepare("SELECT * FROM events ORDER BY pos").all()
        db.close()
        return rows
      }
      const before = events()
      const db = new Sqlite(file)
      db.prepare("UPDATE calls SET response_seq = NULL, is_error = NULL WHERE run_id = 'run-x' AND call_id = 'c1'").run()
      db.close()

      const broken = yield* verifyWorkspace().pipe(Effect.provide(reader(ws)))
      assert.isFalse(verificationOk(broken))
      const error = broken.runs[0]!.error
      assert.strictEqual(error?.reason, "derived_mismatch")
      assert.include(error?.message, "calls row (run_id run-x, call_id c1)")
      assert.include(error?.message, "column response_seq")
      assert.include(error?.message, "repair --rebuild-derived")

      // `inspect --run` (and the facade with a run id) read the run as verify does: its derived rows are proven too.
      const one = yield* inspectWorkspace({ runId: "run-x" }).pipe(Effect.provide(reader(ws)))
      assert.strictEqual(one.runs[0]?.error?._tag === "LedgerCorruption" ? one.runs[0].error.reason : undefined, "derived_mismatch")

      const rebuilt = yield* rebuildDerivedWorkspace({ workspace: ws }).pipe(Effect.provide(owner), Effect.provide(platform))
      assert.deepStrictEqual(rebuilt.rebuilt?.runs, 1)
      assert.deepStrictEqual(events(), before, "no event row was written")
      const fixed = yield* verifyWorkspace().pipe(Effect.provide(reader(ws)))
      assert.isTrue(verificationOk(fixed), JSON.stringify(fixed))

      const second = yield* Effect.flip(append("sqlite", ws, "run-x", [x.response("c1", "Bash", { ok: 2 })]))
      assert.strictEqual(second._tag, "AppendRejected")
      assert.strictEqual((second as { reason?: string }).reason, "duplicate_response")
      assert.isTrue(verificationOk(yield* verifyWorkspace().pipe(Effect.provide(reader(ws)))))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("rebuild refuses when the events themselves do not verify, and changes nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-derived-bad-" })
      const x = EventBuilder.make("run-x")
      yield* append("sqlite", ws, "run-x", [x.opened(), x.user("go"), x.model("ok")])
      const file = NodePath.join(ws, "runtime.sqlite")
      const db = new Sqlite(file)
      db.prepare("UPDATE events SET digest = ? WHERE seq = 2").run(`sha256:${"0".repeat(64)}`)
      const runs = db.prepare("SELECT * FROM runs").all()
      db.close()
      const refused = yield* Effect.flip(rebuildDerivedWorkspace({ workspace: ws }).pipe(Effect.provide(owner), Effect.provide(platform)))
      assert.strictEqual(refused._tag, "LedgerCorruption")
      const after = new Sqlite(file, { readonly: true })
      assert.deepStrictEqual(after.prepare("SELECT * FROM runs").all(), runs)
      after.close()
    }).pipe(Effect.provide(NodeContext.layer)))
})

// A FileSystem that counts how often the JSONL ledger is opened or streamed.
const counting = (fs: FileSystem.FileSystem, reads: { n: number }): FileSystem.FileSystem => {
  const ledger = (path: string) => path.endsWith("/runtime-events.jsonl")
  return {
    ...fs,
    stream: (path, options) => {
      if (ledger(path)) reads.n++
      return fs.stream(path, options)
    },
    open: (path, options) => {
      if (ledger(path)) reads.n++
      return fs.open(path, options)
    },
    readFile: (path) => {
      if (ledger(path)) reads.n++
      return fs.readFile(path)
    },
    readFileString: (path, encoding) => {
      if (ledger(path)) reads.n++
      return fs.readFileString(path, encoding)
    }
  }
}

describe("JSONL read verbs read the file once", () => {
  it.scopedLive("verify and inspect over 40 runs each open the ledger once, clean or torn", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-" })
      yield* Effect.gen(function*() {
        const s = yield* RuntimeEventStore
        for (let i = 0; i < 40; i++) {
          const b = EventBuilder.make(`run-${i}`)
          yield* s.append(b.runId, [b.opened(), b.user(`u${i}`), b.model(`m${i}`)])
        }
      }).pipe(Effect.provide(writer("jsonl", ws)), Effect.scoped)
      const reads = { n: 0 }
      const counted = Layer.succeed(FileSystem.FileSystem, counting(fs, reads))
      const readerCounted = Layer.provide(layerWorkspace({ workspace: ws, readOnly: true }), Layer.merge(counted, NodeWorkspaceLock.layerNode))
      const verified = yield* verifyWorkspace().pipe(Effect.provide(readerCounted))
      assert.strictEqual(verified.runs.length, 40)
      assert.isTrue(verificationOk(verified))
      assert.strictEqual(reads.n, 1, "verify read the ledger once")
      reads.n = 0
      const inspected = yield* inspectWorkspace().pipe(Effect.provide(readerCounted))
      assert.strictEqual(inspected.runs.length, 40)
      assert.strictEqual(reads.n, 1, "inspect read the ledger once")
      // A torn tail fails every run, still in one read.
      yield* fs.writeFileString(NodePath.join(ws, "runtime-events.jsonl"), "{\"dig", { flag: "a" })
      reads.n = 0
      const torn = yield* verifyWorkspace().pipe(Effect.provide(readerCounted))
      assert.strictEqual(torn.runs.length, 40)
      assert.isTrue(torn.runs.every((run) => run.error?.reason === "torn_row" && run.seq === 3))
      assert.strictEqual(reads.n, 1, "verify of a torn ledger read it once")
    }).pipe(Effect.provide(NodeContext.layer)))
})
