// Every store's verified reads can be followed (Domain/Rules/VerifiedRead.ts): `readRunPages` and `scanRuns` of the
// JSONL and memory stores, and the console's pausing wrapper over any store, hand their reader's verifier to the
// planner (one call index, built once), which then plans exactly as over the same rows verified afresh; a damaged
// row still fails the followed read.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Equal, Layer, Stream } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { yieldingStore } from "../src/Console/internal/data.js"
import { RunId } from "../src/Domain/Ids.js"
import { CommittedRow } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as ResumePlanner from "../src/Domain/Rules/ResumePlanner.js"
import * as VerifiedRead from "../src/Domain/Rules/VerifiedRead.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { FILE_NAME as JSONL_FILE } from "../src/Layers/internal/jsonlFiles.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import * as ScanRuns from "../src/Services/ScanRuns.js"

const rid = (s: string) => RunId.make(s)

// Replayed text, answered and dangling calls, a hidden call and response, a diagnostic.
const runEvents = (name: string) => {
  const b = EventBuilder.make(name)
  return [
    b.opened(),
    b.user("hello"),
    b.call("c1", "Read", { path: "/a" }),
    b.response("c1", "Read", { text: "caf\u00e9" }),
    b.call("c2", "Bash", { cmd: "ls" }, { hidden: true }),
    b.response("c2", "Bash", { out: "" }, { hidden: true }),
    b.call("c3", "Grep", { pattern: "x" }),
    b.diagnostic("note"),
    b.model("thinking"),
    b.user("bye")
  ]
}

// The same rows as fresh objects (no reader's mark): the planner verifies every one of them itself.
const fresh = (rows: ReadonlyArray<CommittedRow>) =>
  rows.map((r) => new CommittedRow({ digest: r.digest, end: r.end, event: r.event, seq: r.seq }))

const NAMES = ["run-a", "run-b", "run-c"]

// Each run written in two appends, so that the runs' rows interleave in a file.
const fill = (store: RuntimeEventStoreShape) =>
  Effect.gen(function*() {
    for (const name of NAMES) yield* store.append(rid(name), runEvents(name).slice(0, 4))
    for (const name of NAMES) yield* store.append(rid(name), runEvents(name).slice(4))
  })

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-followed-" }))

const jsonl = (readOnly: boolean) =>
  Effect.gen(function*() {
    const ws = yield* tempWorkspace
    const writer = yield* JsonlRuntimeEventStore.make({ workspace: ws })
    yield* fill(writer)
    const store = readOnly ? yield* JsonlRuntimeEventStore.make({ workspace: ws, readOnly: true }) : writer
    return { ws, store }
  }).pipe(Effect.provide(NodeWorkspaceLock.layer))

const stores: ReadonlyArray<readonly [string, Effect.Effect<RuntimeEventStoreShape, unknown, any>]> = [
  ["JSONL writer", Effect.map(jsonl(false), (s) => s.store)],
  ["JSONL reader", Effect.map(jsonl(true), (s) => s.store)],
  ["memory", Effect.tap(MemoryRuntimeEventStore.make, fill)],
  ["the console's wrapper over SQLite", Effect.gen(function*() {
    const store = yield* SqliteRuntimeEventStore.make({ workspace: yield* tempWorkspace })
    yield* fill(store)
    return yieldingStore(store)
  })],
  ["the console's wrapper over JSONL", Effect.map(jsonl(false), (s) => yieldingStore(s.store))]
]

describe("a store's verified reads are followed", () => {
  for (const [label, open] of stores) {
    it.scopedLive(`${label}: readRunPages hands its verifier over; the plan is the plan of the rows verified afresh`, () =>
      Effect.gen(function*() {
        const store = yield* open
        for (const name of NAMES) {
          const expected = yield* planResume(fresh(yield* store.readRun(rid(name))))
          for (const pageSize of [1, 3, 1000]) {
            const pages = store.readRunPages(rid(name), pageSize)
            const follow = VerifiedRead.followOf(pages)
            assert.isDefined(follow, `${name}, pages of ${pageSize}`)
            assert.isTrue(Equal.equals(yield* planResume(pages), expected), `${name}, pages of ${pageSize}`)
            const state = ResumePlanner.initial()
            yield* Stream.runForEach(
              follow!((verifier) => {
                assert.strictEqual(verifier.runId, name)
                assert.isTrue(ResumePlanner.follow(state, verifier))
              }),
              (row) => Effect.sync(() => ResumePlanner.step(state, row))
            )
            assert.isTrue(state.following)
            assert.deepStrictEqual([...state.verifier!.calls.keys()], ["c1", "c2", "c3"])
            assert.isTrue(Equal.equals(Either.getOrThrow(ResumePlanner.finish(state)), expected))
          }
        }
      }).pipe(Effect.provide(NodeContext.layer)))

    if (label === "memory") continue
    it.scopedLive(`${label}: scanRuns hands each run's verifier over before its first row, and only the run asked for`, () =>
      Effect.gen(function*() {
        const store = yield* open
        for (const only of [undefined, rid("run-b")]) {
          const scan = ScanRuns.scanRuns(store, 2, only)
          const follow = VerifiedRead.scanFollowOf(scan)
          assert.isDefined(follow)
          const states = new Map<string, ResumePlanner.ResumePlannerState>()
          yield* Stream.runForEach(
            follow!((verifier) => {
              assert.isFalse(states.has(verifier.runId))
              const state = ResumePlanner.initial(verifier.runId)
              assert.isTrue(ResumePlanner.follow(state, verifier))
              states.set(verifier.runId, state)
            }),
            (item) =>
              Effect.sync(() => {
                assert.strictEqual(item._tag, "Row")
                if (item._tag === "Row") ResumePlanner.step(states.get(item.row.event.runId)!, item.row)
              })
          )
          assert.deepStrictEqual([...states.keys()], only === undefined ? NAMES : [only])
          for (const [name, state] of states) {
            const expected = yield* planResume(fresh(yield* store.readRun(rid(name))))
            assert.isTrue(Equal.equals(Either.getOrThrow(ResumePlanner.finish(state)), expected), name)
          }
        }
        // inspect shows over the followed scan what it shows over a scan it cannot follow.
        const plain: RuntimeEventStoreShape = { ...store, scanRuns: (pageSize, runId) => Stream.map(store.scanRuns!(pageSize, runId), (item) => item) }
        const followed = yield* inspectWorkspace({ pageSize: 2 }).pipe(Effect.provide(Layer.succeed(RuntimeEventStore, store)))
        const unfollowed = yield* inspectWorkspace({ pageSize: 2 }).pipe(Effect.provide(Layer.succeed(RuntimeEventStore, plain)))
        assert.deepStrictEqual(followed, unfollowed)
        assert.deepStrictEqual(followed.runs.map((r) => r.runId), NAMES)
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scopedLive("JSONL: a damaged row fails the followed read and the followed scan with its run and line", () =>
    Effect.gen(function*() {
      const { store: _writer, ws } = yield* jsonl(false)
      const file = join(ws, JSONL_FILE)
      const lines = readFileSync(file, "utf8").split("\n")
      // run-b's "hello" (its second row, the file's fifth line) says something else: its digest no longer holds.
      const at = lines.findIndex((line) => line.includes("\"run-b\"") && line.includes("hello"))
      assert.isAbove(at, 0)
      lines[at] = lines[at]!.replace("hello", "HELLO")
      writeFileSync(file, lines.join("\n"))
      const reader = yield* JsonlRuntimeEventStore.make({ workspace: ws, readOnly: true }).pipe(Effect.provide(NodeWorkspaceLock.layer))
      const pages = reader.readRunPages(rid("run-b"), 2)
      assert.isDefined(VerifiedRead.followOf(pages))
      const planned = yield* Effect.either(planResume(pages))
      assert.isTrue(Either.isLeft(planned) && planned.left._tag === "LedgerCorruption", String(planned))
      if (Either.isLeft(planned) && planned.left._tag === "LedgerCorruption") {
        assert.strictEqual(planned.left.runId, "run-b")
        assert.strictEqual(planned.left.line, at + 1)
      }
      const inspected = yield* inspectWorkspace({ pageSize: 2 }).pipe(Effect.provide(Layer.succeed(RuntimeEventStore, reader)))
      const runB = inspected.runs.find((r) => r.runId === "run-b")!
      assert.strictEqual(runB.error?._tag, "LedgerCorruption")
      assert.deepStrictEqual(inspected.runs.filter((r) => r.error === undefined).map((r) => r.runId), ["run-a", "run-c"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
