// Tests of `resolve` (docs/spec/05-reconciliation.md): a person's retry, edit and abort as manual bundles, every `ResolutionRefused` reason
// with nothing written, the same decision again counting as done, the actor default, and the shared owner lock.
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Schema, TestClock } from "effect"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { deriveOperationId } from "../src/Domain/Ids.js"
import type { FunctionResponse, RecoveryMode } from "../src/Domain/RuntimeEvent.js"
import * as Tool from "../src/Domain/Tool.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import * as Resolve from "../src/Programs/Resolve.js"
import * as ResolveWorkspace from "../src/Workspace/ResolveWorkspace.js"
import * as ResumeWorkspace from "../src/Workspace/ResumeWorkspace.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import { headerOf } from "./support/runHeaders.js"

const stores = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeOperator.layerFixed("alice"))

const setup = (
  name: string,
  calls: ReadonlyArray<{ readonly callId: string; readonly mode?: RecoveryMode; readonly answered?: boolean; readonly isError?: boolean }>,
  options: { readonly sealed?: boolean } = {}
) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make(name, 1000)
    yield* (yield* RunHeaderStore).create(headerOf(b))
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
    for (const spec of calls) {
      const call = b.call(spec.callId, "Tool", { n: spec.callId })
      if (spec.mode === undefined) {
        yield* store.append(b.runId, [call])
        continue
      }
      yield* store.appendDispatch(b.runId, { call, dispatch: b.dispatched(spec.callId, "Tool", { n: spec.callId }, spec.mode) })
      if (spec.answered === true) {
        yield* store.appendOutcome(b.runId, b.response(spec.callId, "Tool", "ok", { operationBound: true, isError: spec.isError === true }))
      }
    }
    if (options.sealed !== false) yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
    return { b, runId: b.runId, operationId: (callId: string) => deriveOperationId(b.ids.invocationId, callId) }
  })

const refusal = <A>(effect: Effect.Effect<A, { readonly _tag: string }, any>) =>
  Effect.map(Effect.either(effect), (e) => Either.isLeft(e) ? e.left as { _tag: string; reason?: string; message: string } : undefined)

const responses = (runId: string) =>
  Effect.gen(function*() {
    const rows = yield* (yield* RuntimeEventStore).readRun(runId as any)
    return rows.map((r) => r.event.body).filter((b): b is FunctionResponse => b._tag === "FunctionResponse")
  })

describe("resolve (docs/spec/05-reconciliation.md)", () => {
  it.effect("retry: completed (manual_retry) with the outcome_unknown error response; the actor defaults to the Operator", () =>
    Effect.gen(function*() {
      const { operationId, runId } = yield* setup("retry", [{ callId: "c1", mode: "never_auto_retry" }])
      const outcome = yield* Resolve.resolve({ runId, callId: "c1", choice: { _tag: "retry" } })
      assert.deepStrictEqual(outcome, {
        runId,
        callId: "c1",
        operationId: operationId("c1"),
        disposition: "completed",
        reasonCode: "manual_retry",
        actor: "alice",
        alreadyRecorded: false
      })
      const [response] = yield* responses(runId)
      assert.isTrue(response!.isError)
      assert.strictEqual((response!.result as { error: string }).error, "outcome_unknown")
    }).pipe(Effect.provide(stores)))

  it.effect("edit: completed (manual_edit) with the person's result and isError as given; abort: parked manual_abandon", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("edit", [{ callId: "c1", mode: "idempotent" }, { callId: "c2", mode: "read_only" }])
      const edited = yield* Resolve.resolve({ runId, callId: "c1", choice: { _tag: "edit", result: { fixed: [1, 2] }, isError: true }, actor: "bob" })
      assert.strictEqual(edited.reasonCode, "manual_edit")
      assert.strictEqual(edited.actor, "bob")
      const [response] = yield* responses(runId)
      assert.deepStrictEqual(response!.result, { fixed: [1, 2] })
      assert.isTrue(response!.isError)
      const aborted = yield* Resolve.resolve({ runId, callId: "c2", choice: { _tag: "abort" } })
      assert.deepStrictEqual([aborted.disposition, aborted.reasonCode], ["parked", "manual_abandon"])
    }).pipe(Effect.provide(stores)))

  it.effect("a reconciler park can be resolved by a person; the same decision again is already recorded and writes nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("parked", [{ callId: "c1", mode: "never_auto_retry" }])
      yield* Resolve.resolve({ runId, callId: "c1", choice: { _tag: "edit", result: "done", isError: false } })
      const store = yield* RuntimeEventStore
      const after = yield* store.highWater(runId)
      yield* TestClock.adjust("1 second")
      const again = yield* Resolve.resolve({ runId, callId: "c1", choice: { _tag: "edit", result: "done", isError: false } })
      assert.isTrue(again.alreadyRecorded)
      assert.deepStrictEqual(yield* store.highWater(runId), after)
    }).pipe(Effect.provide(stores)))

  it.effect("ResolutionRefused operation_not_found: an unknown run, an unknown call; nothing written", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("nf", [{ callId: "c1", mode: "never_auto_retry" }])
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      const run = yield* refusal(Resolve.resolve({ runId: "nope", callId: "c1", choice: { _tag: "abort" } }))
      assert.deepStrictEqual([run?._tag, run?.reason], ["ResolutionRefused", "operation_not_found"])
      const call = yield* refusal(Resolve.resolve({ runId, callId: "c9", choice: { _tag: "abort" } }))
      assert.deepStrictEqual([call?._tag, call?.reason], ["ResolutionRefused", "operation_not_found"])
      assert.deepStrictEqual(yield* store.highWater(runId), before)
    }).pipe(Effect.provide(stores)))

  it.effect("ResolutionRefused not_settleable: a succeeded, a failed and a not_dispatched operation", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("ns", [
        { callId: "ok", mode: "read_only", answered: true },
        { callId: "bad", mode: "read_only", answered: true, isError: true },
        { callId: "never" }
      ])
      for (const callId of ["ok", "bad", "never"]) {
        const refused = yield* refusal(Resolve.resolve({ runId, callId, choice: { _tag: "retry" } }))
        assert.strictEqual(refused?.reason, "not_settleable", callId)
      }
    }).pipe(Effect.provide(stores)))

  it.effect("ResolutionRefused not_sealed: a run that is not sealed", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("open", [{ callId: "c1", mode: "never_auto_retry" }], { sealed: false })
      const refused = yield* refusal(Resolve.resolve({ runId, callId: "c1", choice: { _tag: "abort" } }))
      assert.strictEqual(refused?.reason, "not_sealed")
      assert.include(refused!.message, "repair")
    }).pipe(Effect.provide(stores)))

  it.effect("ResolutionRefused already_settled: after a manual decision, after a reconciler completion", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("settled", [{ callId: "m", mode: "never_auto_retry" }, { callId: "r", mode: "read_only" }])
      yield* Resolve.resolve({ runId, callId: "m", choice: { _tag: "abort" } })
      const manual = yield* refusal(Resolve.resolve({ runId, callId: "m", choice: { _tag: "retry" } }))
      assert.strictEqual(manual?.reason, "already_settled")
      assert.include(manual!.message, "manual_abandon")
      const tool = Tool.make({ name: "Tool", args: Schema.Struct({ n: Schema.String }), recoveryMode: "read_only", implementation: () => Effect.succeed(1) })
      yield* Reconcile.reconcile({ tools: [tool] })
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      const reconciled = yield* refusal(Resolve.resolve({ runId, callId: "r", choice: { _tag: "abort" } }))
      assert.strictEqual(reconciled?.reason, "already_settled")
      assert.include(reconciled!.message, "reexecuted_read_only")
      assert.deepStrictEqual(yield* store.highWater(runId), before)
    }).pipe(Effect.provide(stores)))

  it.effect("ResolutionRefused invalid_result: a result that is not strict JSON, and one over the event limit; nothing written", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("invalid", [{ callId: "c1", mode: "never_auto_retry" }])
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      for (const result of [{ x: Number.NaN }, { big: 1n }, { at: new Date(0) }, "x".repeat(17 * 1024 * 1024)]) {
        const refused = yield* refusal(Resolve.resolve({ runId, callId: "c1", choice: { _tag: "edit", result, isError: false } }))
        assert.strictEqual(refused?.reason, "invalid_result", typeof result === "string" ? "large" : String(Object.keys(result)))
      }
      assert.deepStrictEqual(yield* store.highWater(runId), before)
    }).pipe(Effect.provide(stores)))
})

describe("resume skips runs a person abandoned (docs/spec/05-reconciliation.md)", () => {
  it.effect("defaultLiveRun passes over the newest run when its only unsettled operations are manual_abandon parks", () =>
    Effect.gen(function*() {
      yield* setup("older", [{ callId: "c1", mode: "never_auto_retry" }])
      const newer = yield* setup("newer", [{ callId: "c1", mode: "never_auto_retry" }, { callId: "c2", mode: "read_only" }])
      const headers = yield* (yield* RunHeaderStore).list()
      assert.strictEqual((yield* ResumeWorkspace.defaultLiveRun(headers))?.runId, "newer")
      yield* Resolve.resolve({ runId: newer.runId, callId: "c1", choice: { _tag: "abort" } })
      // One operation still indeterminate: not abandoned.
      assert.strictEqual((yield* ResumeWorkspace.defaultLiveRun(headers))?.runId, "newer")
      yield* Resolve.resolve({ runId: newer.runId, callId: "c2", choice: { _tag: "abort" } })
      assert.isTrue(yield* ResumeWorkspace.isAbandonedRun(newer.runId))
      assert.strictEqual((yield* ResumeWorkspace.defaultLiveRun(headers))?.runId, "older")
    }).pipe(Effect.provide(stores)))
})

describe("resolve under the owner lock (docs/spec/05-reconciliation.md: shared)", () => {
  it.scoped("resolveWorkspace takes the owner lock shared: it runs beside a host's shared hold, and is refused while someone holds it exclusively", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-resolve-" })
      const owner = yield* WorkspaceOwner
      // A live host: shared. resolve's own shared hold is taken beside it (the store itself is the caller's).
      const seen = yield* Effect.scoped(Effect.zipRight(owner.acquire(ws, "shared"), ResolveWorkspace.holdShared(ws, Effect.succeed("ran"))))
      assert.strictEqual(seen, "ran")
      // An exclusive holder (a repair, a reconcile): resolve waits, then fails WorkspaceLocked without running.
      const locked = yield* Effect.scoped(
        Effect.zipRight(owner.acquire(ws, "exclusive"), Effect.either(ResolveWorkspace.holdShared(ws, Effect.succeed("ran"), { timeoutMs: 0 })))
      )
      assert.isTrue(Either.isLeft(locked))
      assert.strictEqual(Either.isLeft(locked) ? locked.left._tag : "", "WorkspaceLocked")
    }).pipe(Effect.provide(Layer.merge(NodeWorkspaceOwner.layerNode, NodeContext.layer))))

  it.scopedLive("resolveWorkspace on JSONL waits (bounded) for the append lock another writer holds: it records its decision once the lock is free, else WorkspaceLocked naming the wait", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-resolve-wait-" })
      const run = yield* setup("wait", [{ callId: "c1", mode: "never_auto_retry" }, { callId: "c2", mode: "never_auto_retry" }]).pipe(
        Effect.provide(Layer.mergeAll(
          JsonlRuntimeEventStore.layer({ workspace: ws }),
          JsonlRunHeaderStore.layer({ workspace: ws, readOnly: false })
        ).pipe(Layer.provide(NodeWorkspaceLock.layerNode)))
      )
      const lock = yield* WorkspaceLock
      const lockPath = `${ws}/runtime-events.append.lock`
      // Another writer (a host's write, another person's decision) holds the append lock for 600 ms: this one waits,
      // then records its own.
      const holder = yield* Effect.fork(Effect.scoped(Effect.zipRight(
        lock.acquire({ path: lockPath, mode: "exclusive", timeoutMs: 0 }),
        Effect.sleep("600 millis")
      )))
      yield* Effect.sleep("100 millis")
      const done = yield* ResolveWorkspace.resolveWorkspace({ workspace: ws, store: "jsonl", runId: run.runId, callId: "c1", choice: { _tag: "abort" } })
      assert.strictEqual(done.reasonCode, "manual_abandon")
      yield* Fiber.join(holder)
      // Held past the wait: WorkspaceLocked with the wait in its message, nothing recorded.
      const refused = yield* Effect.scoped(Effect.zipRight(
        lock.acquire({ path: lockPath, mode: "exclusive", timeoutMs: 0 }),
        refusal(ResolveWorkspace.resolveWorkspace({ workspace: ws, store: "jsonl", runId: run.runId, callId: "c2", choice: { _tag: "abort" } }))
      ))
      assert.strictEqual(refused?._tag, "WorkspaceLocked")
      assert.include(refused?.message, `within ${ResolveWorkspace.RESOLVE_WRITER_WAIT_MS} ms`)
    }).pipe(
      Effect.provide(Layer.mergeAll(NodeWorkspaceOwner.layerNode, NodeWorkspaceLock.layerNode, NodeOperator.layerFixed("bob"))),
      Effect.provide(NodeContext.layer)
    ), 30_000)
})
