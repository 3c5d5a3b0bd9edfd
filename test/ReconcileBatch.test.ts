// Group commit of observation bundles (docs/spec/05-reconciliation.md, docs/benchmarks.md): `appendRecoveryBatch` on every store that has it
// writes exactly the rows one `appendRecovery` per bundle writes, or nothing; `reconcile` commits its observations in
// groups of `OBSERVATION_BATCH` and falls back to one `appendRecovery` per bundle when a group is refused; and the
// root the file-write observation caches for one reconcile never decides anything but the plain case.
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeFileSystem } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import { join } from "node:path"
import type { RecoveryMode, RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as Observation from "../src/Domain/Observation.js"
import * as Tool from "../src/Domain/Tool.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"
import * as Resolve from "../src/Programs/Resolve.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import { headerOf } from "./support/runHeaders.js"

const memory = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeOperator.layerFixed("alice"))
const N = Schema.Struct({ n: Schema.String })
const EVIDENCE = { seen: true }

// A sealed managed run of `count` reconcilable calls (c0, c1, …), each dispatched with evidence.
const sealedRun = (name: string, count: number, mode: RecoveryMode = "reconcilable") =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make(name, 1000)
    const headers = yield* Effect.serviceOption(RunHeaderStore)
    if (headers._tag === "Some") yield* headers.value.create(headerOf(b))
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
    const calls: Array<RuntimeEvent> = []
    for (let i = 0; i < count; i++) {
      const callId = `c${i}`
      const args = { n: callId }
      const call = b.call(callId, "Obs", args)
      calls.push(call)
      yield* store.appendDispatch(b.runId, {
        call,
        dispatch: b.dispatched(callId, "Obs", args, mode, mode === "reconcilable" ? { evidence: EVIDENCE } : undefined)
      })
    }
    yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
    return { runId: b.runId, calls }
  })

// The observation bundle of each call (even: completed; odd: parked), with the digest the call index recorded.
const bundlesOf = (runId: EventBuilder.EventBuilder["runId"], calls: ReadonlyArray<RuntimeEvent>) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const out: Array<ReadonlyArray<RuntimeEvent>> = []
    for (const [i, call] of calls.entries()) {
      const state = yield* store.toolCallState(runId, (call.body as { callId: string }).callId)
      const evidenceDigest = state.call!.evidenceDigest!
      out.push(
        i % 2 === 0
          ? RecoveryBundle.reconcileCompleted(call, { ts: 2000, evidenceDigest, result: { i } })
          : RecoveryBundle.reconcileParked(call, { ts: 2000, evidenceDigest, observation: "matches_prior_state" })
      )
    }
    return out
  })

const rowsOf = (store: RuntimeEventStoreShape, runId: EventBuilder.EventBuilder["runId"]) =>
  Effect.map(store.readRun(runId), (rows) => rows.map((r) => [r.seq, r.end, r.event.id, r.digest]))

const storeLayers = {
  memory: (_ws: string) => MemoryRuntimeEventStore.layer,
  sqlite: (ws: string) => SqliteRuntimeEventStore.layer({ workspace: ws }).pipe(Layer.provide(NodeFileSystem.layer)),
  jsonl: (ws: string) =>
    JsonlRuntimeEventStore.layer({ workspace: ws }).pipe(Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode)))
} as const

describe("appendRecoveryBatch (group commit of recovery bundles)", () => {
  for (const kind of ["memory", "sqlite", "jsonl"] as const) {
    it.scoped(`${kind}: writes the rows one appendRecovery per bundle writes (each its own group), and they read back clean`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const one = yield* fs.makeTempDirectoryScoped({ prefix: "rr-batch-" })
        const two = yield* fs.makeTempDirectoryScoped({ prefix: "rr-batch-" })
        const byOne = yield* Effect.gen(function*() {
          const store = yield* RuntimeEventStore
          const { calls, runId } = yield* sealedRun("batched", 5)
          for (const bundle of yield* bundlesOf(runId, calls)) yield* store.appendRecovery(runId, bundle)
          return yield* rowsOf(store, runId)
        }).pipe(Effect.provide(storeLayers[kind](one)))
        const byGroup = yield* Effect.gen(function*() {
          const store = yield* RuntimeEventStore
          const { calls, runId } = yield* sealedRun("batched", 5)
          const written = yield* store.appendRecoveryBatch!(runId, yield* bundlesOf(runId, calls))
          assert.deepStrictEqual(written.map((rows) => rows.length), [3, 2, 3, 2, 3])
          const unsettled = yield* store.unsettledCalls(runId)
          assert.deepStrictEqual(
            unsettled.calls.map((c) => [c.callId, c.recovery?.disposition]),
            [["c1", "parked"], ["c3", "parked"]],
            "the call index holds each bundle's decision"
          )
          return yield* rowsOf(store, runId)
        }).pipe(Effect.provide(storeLayers[kind](two)))
        assert.deepStrictEqual(byGroup, byOne)
        // A reopened store reads them back clean (JSONL and SQLite verify the ledger at open / on read).
        if (kind !== "memory") {
          const again = yield* Effect.flatMap(RuntimeEventStore, (store) => rowsOf(store, "batched" as never)).pipe(
            Effect.provide(storeLayers[kind](two))
          )
          assert.deepStrictEqual(again, byOne)
        }
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped(`${kind}: a group with one bundle that breaks a rule writes nothing, the good bundles before it included`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-batch-" })
        yield* Effect.gen(function*() {
          const store = yield* RuntimeEventStore
          const { calls, runId } = yield* sealedRun("refused", 3)
          const bundles = yield* bundlesOf(runId, calls)
          const before = yield* store.highWater(runId)
          const unsettledBefore = yield* store.unsettledCalls(runId)
          // The third bundle settles c0 a second time: a second reconciler bundle of one operation.
          const refused = yield* Effect.either(store.appendRecoveryBatch!(runId, [bundles[0]!, bundles[1]!, bundles[0]!]))
          assert.isTrue(Either.isLeft(refused))
          if (Either.isLeft(refused)) assert.strictEqual(refused.left._tag, "AppendRejected")
          assert.deepStrictEqual(yield* store.highWater(runId), before)
          assert.deepStrictEqual(yield* store.unsettledCalls(runId), unsettledBefore)
          // Nothing half-written: the same group without the bad bundle goes through afterwards.
          const written = yield* store.appendRecoveryBatch!(runId, bundles)
          assert.strictEqual(written.length, 3)
          yield* store.readRun(runId)
        }).pipe(Effect.provide(storeLayers[kind](ws)))
      }).pipe(Effect.provide(NodeContext.layer)))
  }
})

// A reconcilable host tool whose observation proves even calls and parks odd ones.
const observing = Tool.make({
  name: "Obs",
  args: N,
  recoveryMode: "reconcilable",
  evidence: () => Effect.succeed(EVIDENCE),
  observe: (args) =>
    Effect.succeed(
      Number(args.n.slice(1)) % 2 === 0
        ? Observation.matchesExpectedState({ ok: args.n }, "seen")
        : Observation.matchesPriorState("not seen")
    ),
  implementation: () => Effect.succeed({ ok: true })
})

// The store, counting its recovery writes.
const counting = (store: RuntimeEventStoreShape) => {
  const counts = { single: 0, groups: [] as Array<number> }
  const counted = RuntimeEventStore.of({
    ...store,
    appendRecovery: (runId, events, options) => Effect.zipRight(Effect.sync(() => counts.single++), store.appendRecovery(runId, events, options)),
    appendRecoveryBatch: (runId, bundles) =>
      Effect.zipRight(Effect.sync(() => counts.groups.push(bundles.length)), store.appendRecoveryBatch!(runId, bundles))
  })
  return { counted, counts }
}

describe("reconcile commits observations in groups", () => {
  it.effect(`${Reconcile.OBSERVATION_BATCH + 44} observations: two group writes (${Reconcile.OBSERVATION_BATCH} + 44), no single one; reports in call order`, () =>
    Effect.gen(function*() {
      const total = Reconcile.OBSERVATION_BATCH + 44
      const { runId } = yield* sealedRun("many", total)
      const store = yield* RuntimeEventStore
      const { counted, counts } = counting(store)
      const report = yield* Reconcile.reconcile({ tools: [observing] }).pipe(Effect.provideService(RuntimeEventStore, counted))
      assert.deepStrictEqual(counts.groups, [Reconcile.OBSERVATION_BATCH, 44])
      assert.strictEqual(counts.single, 0)
      assert.deepStrictEqual(
        report.operations.map((o) => [o.callId, o.outcome, o.reason]),
        Array.from({ length: total }, (_, i) =>
          i % 2 === 0 ? [`c${i}`, "completed", "reconcile_matches_expected_state"] : [`c${i}`, "parked", "reconcile_matches_prior_state"])
      )
      yield* store.readRun(runId)
      const again = yield* Reconcile.reconcile({ tools: [observing] })
      assert.deepStrictEqual(again.operations.map((o) => o.outcome), Array.from({ length: total / 2 }, () => "parked"))
    }).pipe(Effect.provide(memory)))

  it.effect("a refused group is written one appendRecovery per bundle: the reports are what they are without groups", () =>
    Effect.gen(function*() {
      const { runId } = yield* sealedRun("raced", 4)
      // A person settled c2 after this reconcile read its candidates (a stale call index).
      yield* Resolve.resolve({ runId, callId: "c2", choice: { _tag: "abort" } })
      const store = yield* RuntimeEventStore
      const stale = RuntimeEventStore.of({
        ...store,
        unsettledCalls: (r) => Effect.map(store.unsettledCalls(r), (u) => ({ ...u, calls: u.calls.map(({ recovery: _, ...c }) => c) }))
      })
      const { counted, counts } = counting(stale)
      const report = yield* Reconcile.reconcile({ tools: [observing] }).pipe(Effect.provideService(RuntimeEventStore, counted))
      assert.deepStrictEqual(counts.groups, [4])
      assert.strictEqual(counts.single, 4)
      assert.deepStrictEqual(report.operations.map((o) => [o.callId, o.outcome, o.reason]), [
        ["c0", "completed", "reconcile_matches_expected_state"],
        ["c1", "parked", "reconcile_matches_prior_state"],
        ["c2", "left", "already_decided"],
        ["c3", "parked", "reconcile_matches_prior_state"]
      ])
      assert.include(report.operations[2]!.message, "manual_abandon")
      const decided = (yield* store.readRun(runId)).filter((r) => r.event.body._tag === "RecoveryDecided")
      assert.strictEqual(decided.length, 4, "the person's and three reconciler decisions, none twice")
    }).pipe(Effect.provide(memory)))

  it.effect("a store without group commit is written one appendRecovery per bundle", () =>
    Effect.gen(function*() {
      yield* sealedRun("plain", 3)
      const store = yield* RuntimeEventStore
      const { appendRecoveryBatch: _, ...rest } = store
      let single = 0
      const plain = RuntimeEventStore.of({
        ...rest,
        appendRecovery: (runId, events, options) => Effect.zipRight(Effect.sync(() => single++), store.appendRecovery(runId, events, options))
      })
      const report = yield* Reconcile.reconcile({ tools: [observing] }).pipe(Effect.provideService(RuntimeEventStore, plain))
      assert.deepStrictEqual(report.operations.map((o) => o.outcome), ["completed", "parked", "completed"])
      assert.strictEqual(single, 3)
    }).pipe(Effect.provide(memory)))
})

describe("the file-write observation's root, resolved once per reconcile", () => {
  const files = Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)
  const fixture = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-roots-" })
    const root = join(ws, "root")
    yield* fs.makeDirectory(join(root, "sub"), { recursive: true })
    yield* fs.writeFileString(join(root, "sub", "out.txt"), "hello")
    const evidence = yield* FileWriteTool.evidenceOf(root, { path: "sub/out.txt", content: "hello" })
    return { fs, ws, root, evidence }
  })
  const tagOf = (effect: Effect.Effect<Observation.Observation, Observation.ObserveFailed, any>) =>
    Effect.map(Effect.either(effect), (e) => Either.isLeft(e) ? e.left._tag : e.right.observation)

  it.scoped("a cached root decides as an uncached one when the root is gone, moved or replaced by a link", () =>
    Effect.gen(function*() {
      const { evidence, fs, root, ws } = yield* fixture
      const roots: FileWriteTool.RootCache = new Map()
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence, { roots })), "matches_expected_state")
      assert.strictEqual(roots.size, 1)
      // Moved away and a link to it put in its place: the recorded root now resolves elsewhere.
      yield* fs.rename(root, join(ws, "moved"))
      yield* fs.symlink(join(ws, "moved"), root)
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence)), "diverged")
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence, { roots })), "diverged")
      // Gone: observe_failed, tried again next time, with or without the cache.
      yield* fs.remove(root)
      const fresh: FileWriteTool.RootCache = new Map([[(evidence as { root: string }).root, (evidence as { root: string }).root]])
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence)), "ObserveFailed")
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence, { roots: fresh })), "ObserveFailed")
      // A file where the root was: observe_failed too (the root is not a folder).
      yield* fs.writeFileString(root, "not a folder")
      const stale: FileWriteTool.RootCache = new Map([[(evidence as { root: string }).root, (evidence as { root: string }).root]])
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence)), "ObserveFailed")
      assert.strictEqual(yield* tagOf(FileWriteTool.observe(evidence, { roots: stale })), "ObserveFailed")
    }).pipe(Effect.provide(files)))
})
