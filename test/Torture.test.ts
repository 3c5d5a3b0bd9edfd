// The random-kill campaign (docs/reliability.md, "Torture campaign"): 100 real SIGKILLs per persistent store with every acknowledged row checked,
// and proofs that the checker fails on a lost acknowledgement, a rewritten row and too many appends in flight.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RunId } from "../src/Domain/Ids.js"
import type { CommittedRow } from "../src/Domain/RuntimeEvent.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { Ack, TortureStore } from "../harness/Torture.js"
import {
  bundleChild,
  checkWorkspace,
  DEFAULT_ITERATIONS_PER_WORKSPACE,
  DURABILITY_NOTE,
  emptyModel,
  goAndKill,
  runTorture,
  startChild,
  tortureOk
} from "../harness/Torture.js"
import { groupEvents, prng } from "../harness/TortureChild.js"

const writer = (store: TortureStore, workspace: string) =>
  NodeRuntimeEventStore.layerStore(store, { workspace, readOnly: false }).pipe(
    Layer.provide(NodeWorkspaceLock.layer),
    Layer.build,
    Effect.map(Context.get(RuntimeEventStore))
  )

const ackOf = (row: CommittedRow): Ack => ({ runId: row.event.runId, seq: row.seq, digest: row.digest })

// Appends `appends` groups to `runId` as the child's fiber `fiber` of `iteration` would; returns the committed rows.
const appendAs = (store: TortureStore, workspace: string, runId: string, iteration: string, fiber: string, appends: number) =>
  Effect.gen(function*() {
    const ledger = yield* writer(store, workspace)
    const random = prng(7)
    const rows: Array<CommittedRow> = []
    for (let n = 1; n <= appends; n++) {
      const hw = yield* ledger.highWater(RunId.make(runId)).pipe(Effect.orElseSucceed(() => ({ seq: 0, digest: "" })))
      // Never the large event: keep the files small.
      const events = groupEvents(runId, hw, `${iteration}.${fiber}.${n}`, 1000, () => 0.02 + random() * 0.98)
      rows.push(...(yield* ledger.append(RunId.make(runId), events)))
    }
    return rows
  }).pipe(Effect.scoped)

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-torture-test-" }))

describe("torture campaign", () => {
  it.live("100 SIGKILLs per store: no acknowledged event lost, every check passes", () =>
    Effect.gen(function*() {
      const summaries = yield* runTorture({ iterations: 100, seed: 2024, progressEvery: 0 })
      yield* Effect.logInfo(`torture summaries: ${JSON.stringify(summaries)}`)
      assert.deepStrictEqual(summaries.map((s) => s.store), ["sqlite", "jsonl"])
      for (const s of summaries) {
        assert.deepStrictEqual(s.problems, [], `${s.store}: ${s.problems.join("; ")}`)
        assert.strictEqual(s.kills, 100, `${s.store}: kills`)
        assert.strictEqual(s.lost, 0, `${s.store}: events lost`)
        assert.isAbove(s.acknowledged, 100, `${s.store}: the children acknowledged almost nothing`)
        assert.strictEqual(s.repairs, s.tornTails, `${s.store}: every torn tail is repaired`)
        // A fresh workspace every K kills (the default of the store), each kill checked against its own workspace.
        assert.strictEqual(s.iterationsPerWorkspace, DEFAULT_ITERATIONS_PER_WORKSPACE[s.store])
        assert.strictEqual(s.workspaces, Math.ceil(100 / s.iterationsPerWorkspace), `${s.store}: workspaces`)
        if (s.store === "sqlite") assert.strictEqual(s.tornTails, 0)
        assert.isTrue(s.pass)
      }
      assert.isTrue(tortureOk(summaries))
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 1_800_000 })

  it.scopedLive("the child bundles into one ESM file that imports better-sqlite3 by file URL", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-torture-bundle-" })
      const child = yield* bundleChild(dir)
      assert.isTrue(child.bundled)
      const text = yield* fs.readFileString(path.join(dir, "torture-child.mjs"))
      assert.match(text, /from "file:\/\/[^"]*better-sqlite3[^"]*"/)
      assert.notInclude(text, "from \"effect")

      // A child started ahead touches nothing before its `go`; after it, it appends until it is killed.
      const workspace = path.join(yield* tempWorkspace, "ws")
      const started = yield* startChild(child, ["torture", "sqlite", workspace, "i1", "5", "4"])
      yield* Effect.sleep("2 seconds")
      assert.isTrue(yield* started.isRunning, "the child waits for go")
      assert.isFalse(yield* fs.exists(workspace), "the child created its workspace before go")
      const outcome = yield* goAndKill(started, 100)
      assert.isAbove(outcome.acks.length, 0)
      assert.isAtLeast(outcome.warmMs, 2000)
      assert.isTrue(yield* fs.exists(workspace))
      const check = yield* checkWorkspace("sqlite", workspace, emptyModel(), outcome.acks, "i1")
      assert.deepStrictEqual(check.problems, [])
      assert.strictEqual(check.lost, 0)
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })

  it("says what it cannot prove", () => {
    assert.strictEqual(
      DURABILITY_NOTE,
      "A killed process's page cache survives the kill, so this campaign proves ordering and atomicity only, never durability (power loss)."
    )
  })
})

describe("the torture checker can fail", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.scopedLive(`${store}: a fabricated acknowledgement the ledger does not have is one event lost`, () =>
      Effect.gen(function*() {
        const workspace = yield* tempWorkspace
        const rows = yield* appendAs(store, workspace, "torture-1", "i1", "r1", 3)
        const model = emptyModel()
        const honest = yield* checkWorkspace(store, workspace, model, rows.map(ackOf), "i1")
        assert.deepStrictEqual(honest.problems, [])
        assert.strictEqual(honest.lost, 0)

        const more = yield* appendAs(store, workspace, "torture-2", "i2", "r2", 1)
        const fabricated: Ack = { runId: "torture-1", seq: rows.length + 5, digest: rows[0]!.digest }
        const result = yield* checkWorkspace(store, workspace, model, [...more.map(ackOf), fabricated], "i2")
        assert.strictEqual(result.lost, 1)
        assert.match(result.problems.join("; "), /acknowledged row torture-1 seq \d+ .* is missing/)
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scopedLive("an acknowledged digest that differs from the stored row is one event lost", () =>
    Effect.gen(function*() {
      const workspace = yield* tempWorkspace
      const rows = yield* appendAs("sqlite", workspace, "torture-1", "i1", "r1", 2)
      const acks = rows.map(ackOf)
      acks[1] = { ...acks[1]!, digest: rows[0]!.digest }
      const result = yield* checkWorkspace("sqlite", workspace, emptyModel(), acks, "i1")
      assert.strictEqual(result.lost, 1)
      assert.match(result.problems.join("; "), /is different/)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a previously verified row that is gone or changed counts as lost", () =>
    Effect.gen(function*() {
      const workspace = yield* tempWorkspace
      const rows = yield* appendAs("sqlite", workspace, "torture-1", "i1", "r1", 1)
      const model = emptyModel()
      model.runs.set("torture-1", [...rows.map((r) => r.digest), rows[0]!.digest])
      const result = yield* checkWorkspace("sqlite", workspace, model, [], "i2")
      assert.strictEqual(result.lost, 1)
      assert.match(result.problems.join("; "), /previously verified row is missing/)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("two unacknowledged appends of one fiber are more than the appends in flight", () =>
    Effect.gen(function*() {
      const workspace = yield* tempWorkspace
      yield* appendAs("jsonl", workspace, "torture-1", "i1", "r1", 2)
      const oneInFlight = yield* checkWorkspace("jsonl", workspace, emptyModel(), [], "i9")
      // Rows of another iteration's child are not this iteration's appends in flight.
      assert.match(oneInFlight.problems.join("; "), /not from this iteration's child/)
      const result = yield* checkWorkspace("jsonl", workspace, emptyModel(), [], "i1")
      assert.strictEqual(result.lost, 0)
      assert.strictEqual(result.inFlight, 2)
      assert.match(result.problems.join("; "), /fiber r1 has 2 unacknowledged appends/)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("jsonl: a torn tail is counted, quarantined, and appending continues the chain", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const workspace = yield* tempWorkspace
      const rows = yield* appendAs("jsonl", workspace, "torture-1", "i1", "r1", 2)
      const model = emptyModel()
      assert.deepStrictEqual((yield* checkWorkspace("jsonl", workspace, model, rows.map(ackOf), "i1")).problems, [])
      const ledger = path.join(workspace, NodeRuntimeEventStore.LEDGER_FILES.jsonl)
      yield* fs.writeFile(ledger, new TextEncoder().encode("{\"digest\":\"sha256:00"), { flag: "a" })
      const result = yield* checkWorkspace("jsonl", workspace, model, [], "i2")
      assert.deepStrictEqual(result.problems, [])
      assert.isTrue(result.tornTail)
      assert.isTrue(result.repaired)
      assert.strictEqual(result.lost, 0)
      // The parent's own append after the repair is in the model, one past the rows before.
      assert.strictEqual(model.runs.get("torture-1")?.length, rows.length + 1)
      const files = yield* fs.readDirectory(workspace)
      assert.isTrue(files.some((f) => f.startsWith("runtime-events.jsonl.quarantine-")), files.join(", "))
    }).pipe(Effect.provide(NodeContext.layer)))
})
