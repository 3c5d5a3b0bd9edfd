// `RuntimeEventStore.unsettledCalls` (docs/spec/05-reconciliation.md: reconcile's candidates from the call index) on every store, as a writer
// keeps it and as a reader folds it: calls without a response, in call order, with their recovery state.
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { RunId } from "../src/Domain/Ids.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import { EVIDENCE_DIGEST, sealedRun } from "./support/recoveryConformance.js"

const open = (layer: Layer.Layer<RuntimeEventStore, unknown, FileSystem.FileSystem>) =>
  Layer.build(layer).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))

const fill = (store: RuntimeEventStoreShape) =>
  Effect.gen(function*() {
    const { b, call, r } = yield* sealedRun(store, "run-u", [
      { callId: "answered", mode: "read_only" },
      { callId: "indeterminate", mode: "read_only" },
      { callId: "never" },
      { callId: "parked", mode: "reconcilable" },
      { callId: "edited", mode: "never_auto_retry" },
      { callId: "abandoned", mode: "never_auto_retry" }
    ], { sealed: false })
    yield* store.appendOutcome(r, b.response("answered", "Tool", "ok", { operationBound: true }))
    yield* store.append(r, [b.terminated("failed", "process_interrupted")])
    yield* store.appendRecovery(r, RecoveryBundle.reconcileParked(call("parked"), { ts: 1, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
    yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("edited"), { ts: 1, actor: "alice", result: 1 }))
    yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("abandoned"), { ts: 1, actor: "bob" }))
    return r
  })

const check = (store: RuntimeEventStoreShape, runId: RunId) =>
  Effect.gen(function*() {
    const u = yield* store.unsettledCalls(runId)
    assert.strictEqual(u.toolBoundary, "t1_after_preflight_v1")
    assert.isNumber(u.terminalSeq)
    assert.deepStrictEqual(u.calls.map((c) => [c.callId, c.recoveryMode ?? null, c.recovery?.reasonCode ?? null]), [
      ["indeterminate", "read_only", null],
      ["never", null, null],
      ["parked", "reconcilable", "reconcile_diverged"],
      ["abandoned", "never_auto_retry", "manual_abandon"]
    ])
    assert.strictEqual(u.calls[2]!.evidenceDigest, EVIDENCE_DIGEST)
    const none = yield* store.unsettledCalls(RunId.make("no-such-run"))
    assert.deepStrictEqual(none, { toolBoundary: undefined, terminalSeq: undefined, calls: [] })
  })

describe("unsettledCalls (docs/spec/05-reconciliation.md: candidates from the call index)", () => {
  it.scoped("memory", () =>
    Effect.gen(function*() {
      const store = yield* open(MemoryRuntimeEventStore.layer)
      yield* check(store, yield* fill(store))
    }).pipe(Effect.provide(NodeContext.layer)))

  for (const kind of ["sqlite", "jsonl"] as const) {
    it.scoped(`${kind}: the writer's index, a reopened writer, and a read-only reader agree`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-unsettled-" })
        const layer = (readOnly: boolean) =>
          NodeRuntimeEventStore.layerStore(kind, { workspace, readOnly }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))
        const runId = yield* Effect.scoped(Effect.gen(function*() {
          const writer = yield* open(layer(false))
          const r = yield* fill(writer)
          yield* check(writer, r)
          return r
        }))
        yield* Effect.scoped(Effect.flatMap(open(layer(false)), (reopened) => check(reopened, runId)))
        yield* Effect.scoped(Effect.flatMap(open(layer(true)), (reader) => check(reader, runId)))
      }).pipe(Effect.provide(NodeContext.layer)))
  }
})
