// Tests of `reconcile` (docs/spec/05-reconciliation.md): every mode of the table, the flag rule, every "left unsettled" report, unmanaged and
// unreadable runs, candidates from the call index, exact-retry convergence, and the temp file of a file write.
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Layer, Schema, TestClock } from "effect"
import { join } from "node:path"
import { LedgerCorruption } from "../src/Domain/Errors.js"
import { tempFileName } from "../src/Domain/FileWriteEvidence.js"
import { deriveOperationId, RunId } from "../src/Domain/Ids.js"
import type { FunctionResponse, RecoveryMode, RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { reconcileExitCode } from "../src/Domain/Settlement.js"
import * as Tool from "../src/Domain/Tool.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as HostStartup from "../src/Programs/HostStartup.js"
import * as Resolve from "../src/Programs/Resolve.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import { WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { headerOf } from "./support/runHeaders.js"

const files = Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)
const stores = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeOperator.layerFixed("alice"))

interface CallSpec {
  readonly callId: string
  readonly name?: string
  readonly args?: unknown
  /** Absent: the call is committed without a dispatch. */
  readonly mode?: RecoveryMode
  readonly evidence?: unknown
}

/** A run of `calls` (dispatched in their modes), sealed unless `sealed: false`, with a header unless `managed: false`. */
const setup = (
  name: string,
  calls: ReadonlyArray<CallSpec>,
  options: { readonly sealed?: boolean; readonly managed?: boolean; readonly boundary?: "none" | "t1_after_preflight_v1" } = {}
) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const b = EventBuilder.make(name, 1000)
    if (options.managed !== false) yield* headers.create(headerOf(b))
    yield* store.append(b.runId, [b.opened(options.boundary ?? "t1_after_preflight_v1"), b.user("go")])
    const events = new Map<string, RuntimeEvent>()
    for (const spec of calls) {
      const toolName = spec.name ?? "Tool"
      const args = spec.args ?? { n: spec.callId }
      const call = b.call(spec.callId, toolName, args)
      events.set(spec.callId, call)
      if (spec.mode === undefined) yield* store.append(b.runId, [call])
      else {
        const dispatch = b.dispatched(spec.callId, toolName, args, spec.mode, spec.evidence !== undefined ? { evidence: spec.evidence } : undefined)
        yield* store.appendDispatch(b.runId, { call, dispatch })
      }
    }
    if (options.sealed !== false) yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
    return { b, runId: b.runId, operationId: (callId: string) => deriveOperationId(b.ids.invocationId, callId) }
  })

const decisionOf = (runId: RunId, callId: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const resolved = yield* RecoveryResolver.resolveStream(store.readRunPages(runId, 100), { runId })
    return resolved.operations.find((op) => op.callId === callId)!
  })

const responseOf = (runId: RunId, callId: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const rows = yield* store.readRun(runId)
    return rows.map((r) => r.event.body).find((b): b is FunctionResponse => b._tag === "FunctionResponse" && b.callId === callId)
  })

const N = Schema.Struct({ n: Schema.String })

/** A read_only or idempotent tool that counts its runs and records the keys it was given. */
const counting = (mode: "read_only" | "idempotent", behave: (n: number) => Effect.Effect<unknown, unknown> = (n) => Effect.succeed({ run: n })) => {
  const runs: Array<string | undefined> = []
  const tool = Tool.make({
    name: "Tool",
    args: N,
    recoveryMode: mode,
    implementation: (_args, context) => Effect.suspend(() => {
      runs.push(context.idempotencyKey)
      return behave(runs.length)
    })
  })
  return { tool, runs }
}

const withFlag = ConfigProvider.fromMap(new Map([["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1"]]))
const withoutFlag = ConfigProvider.fromMap(new Map())

describe("reconcile (docs/spec/05-reconciliation.md)", () => {
  it.effect("read_only: re-runs the implementation and records a completed bundle (reexecuted_read_only); a second reconcile finds nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("ro", [{ callId: "c1", mode: "read_only" }])
      const { tool, runs } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.deepStrictEqual(report.operations.map((o) => [o.callId, o.outcome, o.reason]), [["c1", "completed", "reexecuted_read_only"]])
      assert.strictEqual(runs.length, 1)
      assert.strictEqual((yield* decisionOf(runId, "c1")).decision, "completed")
      assert.deepStrictEqual((yield* responseOf(runId, "c1"))?.result, { run: 1 })
      assert.strictEqual(reconcileExitCode(report), 0)
      const again = yield* Reconcile.reconcile({ tools: [tool] })
      assert.deepStrictEqual(again.operations, [])
      assert.strictEqual(runs.length, 1)
    }).pipe(Effect.provide(stores)))

  it.effect("read_only: a typed failure of the re-run is a completed bundle with an error result", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("ro-fail", [{ callId: "c1", mode: "read_only" }])
      const { tool } = counting("read_only", () => Effect.fail({ _tag: "Nope", message: "no" }))
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.strictEqual(report.operations[0]!.outcome, "completed")
      const response = yield* responseOf(runId, "c1")
      assert.isTrue(response?.isError)
      assert.deepStrictEqual(response?.result, { error: "Nope", message: "no" })
    }).pipe(Effect.provide(stores)))

  it.effect("the flag rule: without the flag an idempotent operation is left awaiting_confirmation and never run", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("idem-wait", [{ callId: "c1", mode: "idempotent" }])
      const { tool, runs } = counting("idempotent")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.withConfigProvider(withoutFlag))
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["left", "awaiting_confirmation"]])
      assert.strictEqual(runs.length, 0)
      assert.strictEqual(reconcileExitCode(report), 1)
      assert.strictEqual((yield* decisionOf(runId, "c1")).decision, "indeterminate")
    }).pipe(Effect.provide(stores)))

  it.effect("the flag rule: confirmed: true re-runs an idempotent tool with the key recorded at T1", () =>
    Effect.gen(function*() {
      const { operationId, runId } = yield* setup("idem-confirmed", [{ callId: "c1", mode: "idempotent" }])
      const { tool, runs } = counting("idempotent")
      const report = yield* Reconcile.reconcile({ tools: [tool], confirmed: true }).pipe(Effect.withConfigProvider(withoutFlag))
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["completed", "reexecuted_idempotent"]])
      assert.deepStrictEqual(runs, [operationId("c1")])
      assert.strictEqual((yield* responseOf(runId, "c1"))?.idempotencyKey, operationId("c1"))
    }).pipe(Effect.provide(stores)))

  it.effect("the flag rule: MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1 (through Config) re-runs an idempotent tool", () =>
    Effect.gen(function*() {
      yield* setup("idem-flag", [{ callId: "c1", mode: "idempotent" }])
      const { tool, runs } = counting("idempotent")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.withConfigProvider(withFlag))
      assert.strictEqual(report.operations[0]!.reason, "reexecuted_idempotent")
      assert.strictEqual(runs.length, 1)
    }).pipe(Effect.provide(stores)))

  it.effect("reexecution_failed: a defect of an idempotent re-run writes nothing; the next reconcile runs it again with the same key", () =>
    Effect.gen(function*() {
      const { operationId, runId } = yield* setup("idem-defect", [{ callId: "c1", mode: "idempotent" }])
      const { tool, runs } = counting("idempotent", (n) => n === 1 ? Effect.die("boom") : Effect.succeed("done"))
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      const first = yield* Reconcile.reconcile({ tools: [tool], confirmed: true })
      assert.deepStrictEqual(first.operations.map((o) => [o.outcome, o.reason]), [["left", "reexecution_failed"]])
      assert.deepStrictEqual(yield* store.highWater(runId), before)
      const second = yield* Reconcile.reconcile({ tools: [tool], confirmed: true })
      assert.strictEqual(second.operations[0]!.reason, "reexecuted_idempotent")
      assert.deepStrictEqual(runs, [operationId("c1"), operationId("c1")])
    }).pipe(Effect.provide(stores)))

  it.effect("reexecution_failed: an interrupted re-run writes nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("idem-int", [{ callId: "c1", mode: "idempotent" }])
      const { tool } = counting("idempotent", () => Effect.interrupt)
      const report = yield* Reconcile.reconcile({ tools: [tool], confirmed: true })
      assert.strictEqual(report.operations[0]!.reason, "reexecution_failed")
      assert.strictEqual((yield* decisionOf(runId, "c1")).decision, "indeterminate")
    }).pipe(Effect.provide(stores)))

  it.effect("needs_person: never_auto_retry; a call with no ToolDispatched (none boundary); a reconcilable dispatch without evidence", () =>
    Effect.gen(function*() {
      yield* setup("never", [{ callId: "c1", mode: "never_auto_retry" }])
      yield* setup("none", [{ callId: "c1" }], { boundary: "none" })
      yield* setup("noevidence", [{ callId: "c1", mode: "reconcilable" }])
      const report = yield* Reconcile.reconcile({ tools: [] })
      assert.deepStrictEqual(
        report.operations.map((o) => [o.runId, o.outcome, o.reason]),
        [["never", "left", "needs_person"], ["none", "left", "needs_person"], ["noevidence", "left", "needs_person"]]
      )
      assert.include(report.operations[1]!.message, "no ToolDispatched")
      assert.include(report.operations[2]!.message, "without evidence")
    }).pipe(Effect.provide(stores)))

  it.effect("needs_person: recorded args that no longer decode; a tool whose definition lacks observe for a reconcilable dispatch", () =>
    Effect.gen(function*() {
      yield* setup("args", [{ callId: "c1", mode: "read_only", args: { n: 5 } }])
      yield* setup("lacking", [{ callId: "c1", mode: "reconcilable", evidence: { tool: "x@1" } }])
      const { tool, runs } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.deepStrictEqual(report.operations.map((o) => [o.runId, o.reason]), [["args", "needs_person"], ["lacking", "needs_person"]])
      assert.include(report.operations[0]!.message, "no longer decode")
      assert.include(report.operations[1]!.message, "no longer reconcilable")
      assert.strictEqual(runs.length, 0)
    }).pipe(Effect.provide(stores)))

  it.effect("needs_person: a re-run whose result is over the event limit writes nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("huge", [{ callId: "c1", mode: "read_only" }])
      const { tool } = counting("read_only", () => Effect.succeed("x".repeat(17 * 1024 * 1024)))
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.strictEqual(report.operations[0]!.reason, "needs_person")
      assert.include(report.operations[0]!.message, "limit")
      assert.deepStrictEqual(yield* store.highWater(runId), before)
    }).pipe(Effect.provide(stores)))

  it.effect("needs_host_tool: a read_only, idempotent or reconcilable operation whose tool the host does not have", () =>
    Effect.gen(function*() {
      yield* setup("ro", [{ callId: "c1", mode: "read_only" }])
      yield* setup("idem", [{ callId: "c1", mode: "idempotent" }])
      yield* setup("rec", [{ callId: "c1", mode: "reconcilable", evidence: { tool: "other@1" } }])
      const report = yield* Reconcile.reconcile({ tools: [], confirmed: true })
      assert.deepStrictEqual(report.operations.map((o) => o.reason), ["needs_host_tool", "needs_host_tool", "needs_host_tool"])
      assert.strictEqual(reconcileExitCode(report), 1)
    }).pipe(Effect.provide(stores)))

  it.effect("not_sealed: an operation of a managed run that is not sealed is reported, nothing written", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("open", [{ callId: "c1", mode: "read_only" }], { sealed: false })
      const { tool, runs } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["left", "not_sealed"]])
      assert.strictEqual(runs.length, 0)
      assert.strictEqual((yield* (yield* RuntimeEventStore).highWater(runId)).seq, 4)
    }).pipe(Effect.provide(stores)))

  it.effect("unmanaged runs are reported and never touched; --run of an unmanaged run touches nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("loose", [{ callId: "c1", mode: "read_only" }], { managed: false })
      const { tool, runs } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] })
      assert.deepStrictEqual(report.unmanaged, ["loose"])
      assert.deepStrictEqual(report.operations, [])
      const one = yield* Reconcile.reconcile({ tools: [tool], runId: "loose" })
      assert.deepStrictEqual(one.unmanaged, ["loose"])
      assert.strictEqual(runs.length, 0)
      assert.strictEqual((yield* decisionOf(runId, "c1")).decision, "indeterminate")
      const unknown = yield* Effect.flip(Reconcile.reconcile({ tools: [tool], runId: "no-such-run" }))
      assert.strictEqual(unknown._tag, "RunNotFound")
    }).pipe(Effect.provide(stores)))

  it.effect("unreadable: a run that cannot be read is reported (exit 2) and the other runs are still reconciled", () =>
    Effect.gen(function*() {
      const bad = yield* setup("bad", [{ callId: "c1", mode: "read_only" }])
      const good = yield* setup("good", [{ callId: "c1", mode: "read_only" }])
      const store = yield* RuntimeEventStore
      // A store whose reads of one run fail as a corrupt ledger would.
      const broken = RuntimeEventStore.of({
        ...store,
        readRun: (runId, options) =>
          runId === bad.runId
            ? Effect.fail(new LedgerCorruption({ runId, reason: "digest_mismatch", seq: 2, message: "row 2 of run bad does not chain" }))
            : store.readRun(runId, options),
        readRowsAt: (runId, seqs) =>
          runId === bad.runId
            ? Effect.fail(new LedgerCorruption({ runId, reason: "digest_mismatch", seq: 2, message: "row 2 of run bad does not chain" }))
            : store.readRowsAt(runId, seqs)
      })
      const { tool } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.provideService(RuntimeEventStore, broken))
      assert.deepStrictEqual(report.unreadable.map((u) => [u.runId, u.reason]), [["bad", "digest_mismatch"]])
      assert.deepStrictEqual(report.operations.map((o) => [o.runId, o.outcome, o.reason]), [
        ["bad", "left", "unreadable"],
        ["good", "completed", "reexecuted_read_only"]
      ])
      assert.strictEqual(reconcileExitCode(report), 2)
      assert.strictEqual((yield* decisionOf(good.runId, "c1")).decision, "completed")
    }).pipe(Effect.provide(stores)))

  it.effect("candidates come from the call index: runs without unsettled calls are never read", () =>
    Effect.gen(function*() {
      const quiet = yield* setup("quiet", [])
      yield* setup("busy", [{ callId: "c1", mode: "read_only" }])
      const store = yield* RuntimeEventStore
      const reads: Array<string> = []
      const counted = RuntimeEventStore.of({
        ...store,
        readRun: (runId, options) => Effect.zipRight(Effect.sync(() => reads.push(runId)), store.readRun(runId, options)),
        readRowsAt: (runId, seqs) => Effect.zipRight(Effect.sync(() => reads.push(runId)), store.readRowsAt(runId, seqs)),
        readRunPages: (runId, size) => {
          reads.push(runId)
          return store.readRunPages(runId, size)
        }
      })
      const { tool } = counting("read_only")
      yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.provideService(RuntimeEventStore, counted))
      assert.notInclude(reads, quiet.runId)
      assert.deepStrictEqual(reads, ["busy"])
    }).pipe(Effect.provide(stores)))

  it.effect("no O(events) read: reconcile reads only its candidates' call and dispatch rows (readRowsAt, once per run), never the whole run", () =>
    Effect.gen(function*() {
      const { b, runId } = yield* setup("long", [{ callId: "c1", mode: "read_only" }, { callId: "c2", mode: "read_only" }])
      const store = yield* RuntimeEventStore
      const whole: Array<string> = []
      const asked: Array<ReadonlyArray<number>> = []
      const counted = RuntimeEventStore.of({
        ...store,
        readRun: (r, options) => Effect.zipRight(Effect.sync(() => whole.push(r)), store.readRun(r, options)),
        readRunPages: (r, size) => {
          whole.push(r)
          return store.readRunPages(r, size)
        },
        readRowsAt: (r, seqs) => Effect.zipRight(Effect.sync(() => asked.push(seqs)), store.readRowsAt(r, seqs))
      })
      const { tool } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.provideService(RuntimeEventStore, counted))
      assert.deepStrictEqual(report.operations.map((o) => o.outcome), ["completed", "completed"])
      assert.deepStrictEqual(whole, [], "the run is never read whole")
      const calls = (yield* store.unsettledCalls(runId)).calls
      assert.deepStrictEqual(calls, [], "both settled")
      // setup writes opened, user, then per call its FunctionCall and ToolDispatched (seqs 3, 4 and 5, 6).
      assert.deepStrictEqual(asked, [[3, 4, 5, 6]])
      assert.strictEqual(b.runId, runId)
    }).pipe(Effect.provide(stores)))

  it.effect("already_decided: a decision recorded in between (a stale candidate) is reported as the decision already recorded, nothing written", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("raced", [{ callId: "c1", mode: "read_only" }])
      yield* Resolve.resolve({ runId, callId: "c1", choice: { _tag: "abort" } })
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      // The call index as a racing reconcile saw it before the person's decision.
      const stale = RuntimeEventStore.of({
        ...store,
        unsettledCalls: (r) =>
          Effect.map(store.unsettledCalls(r), (u) => ({ ...u, calls: u.calls.map(({ recovery: _, ...c }) => c) }))
      })
      const { tool, runs } = counting("read_only")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.provideService(RuntimeEventStore, stale))
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["left", "already_decided"]])
      assert.include(report.operations[0]!.message, "manual_abandon")
      assert.include(report.operations[0]!.message, "alice")
      assert.strictEqual(runs.length, 1)
      assert.deepStrictEqual(yield* store.highWater(runId), before)
    }).pipe(Effect.provide(stores)))

  it.effect("exact-retry convergence: a bundle rebuilt after its commit (new ts) counts as done and writes nothing", () =>
    Effect.gen(function*() {
      const { runId } = yield* setup("again", [{ callId: "c1", mode: "read_only" }, { callId: "c2", mode: "read_only" }])
      const { tool } = counting("read_only", () => Effect.succeed("same"))
      yield* Reconcile.reconcile({ tools: [tool] })
      const store = yield* RuntimeEventStore
      const after = yield* store.highWater(runId)
      // A process killed after the commit and before it saw it: its successor sees the calls as candidates again.
      const stale = RuntimeEventStore.of({
        ...store,
        unsettledCalls: () =>
          Effect.map(store.toolCallState(runId, "c1"), (s) => ({
            toolBoundary: s.toolBoundary,
            terminalSeq: s.terminalSeq,
            calls: [
              (({ recovery: _r, responseSeq: _s, ...c }) => c)(s.call!)
            ]
          }))
      })
      yield* TestClock.adjust("5 millis")
      const report = yield* Reconcile.reconcile({ tools: [tool] }).pipe(Effect.provideService(RuntimeEventStore, stale))
      assert.deepStrictEqual(report.operations.map((o) => [o.callId, o.outcome, o.reason]), [["c1", "completed", "reexecuted_read_only"]])
      assert.deepStrictEqual(yield* store.highWater(runId), after)
    }).pipe(Effect.provide(stores)))
})

describe("reconcile of file writes (docs/spec/05-reconciliation.md, reconcilable)", () => {
  const fileRun = (root: string, name: string, content: string) =>
    Effect.gen(function*() {
      const args = { path: "sub/out.txt", content }
      const evidence = yield* FileWriteTool.evidenceOf(root, args)
      return yield* setup(name, [{ callId: "c1", name: "write_file", args, mode: "reconcilable", evidence }])
    })

  const fixture = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-rec-" })
    const root = join(ws, "root")
    yield* fs.makeDirectory(join(root, "sub"), { recursive: true })
    return { fs, root, target: join(root, "sub", "out.txt") }
  })

  it.scoped("matches_expected_state: completed with the synthesized result, never written again; the leftover temp file is removed", () =>
    Effect.gen(function*() {
      const { fs, root, target } = yield* fixture
      const { operationId, runId } = yield* fileRun(root, "fw-done", "hello")
      yield* fs.writeFileString(target, "hello")
      const temp = join(root, "sub", tempFileName("out.txt", operationId("c1")))
      yield* fs.writeFileString(temp, "hel")
      const mtime = (yield* fs.stat(target)).mtime
      const fileWrite = yield* Reconcile.builtinFileWrite()
      const report = yield* Reconcile.reconcile({ tools: [FileWriteTool.fileWriteTool({ root })], fileWrite })
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["completed", "reconcile_matches_expected_state"]])
      const response = yield* responseOf(runId, "c1")
      assert.deepStrictEqual((response?.result as { path: string }).path, "sub/out.txt")
      assert.isFalse(yield* fs.exists(temp))
      assert.deepStrictEqual((yield* fs.stat(target)).mtime, mtime)
      const decision = yield* decisionOf(runId, "c1")
      assert.strictEqual(decision.recovery?.provenance.actor, "reconcile:write_file")
    }).pipe(Effect.provide(Layer.merge(stores, files))))

  it.scoped("matches_prior_state and diverged park the operation (the CLI's built-in observation, no host tool)", () =>
    Effect.gen(function*() {
      const { fs, root, target } = yield* fixture
      const prior = yield* fileRun(root, "fw-prior", "hello")
      const report1 = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite() })
      assert.deepStrictEqual(report1.operations.map((o) => [o.outcome, o.reason]), [["parked", "reconcile_matches_prior_state"]])
      assert.isFalse(yield* fs.exists(target), "no blind redo")
      yield* fs.writeFileString(target, "someone else")
      const diverged = yield* fileRun(root, "fw-div", "mine")
      yield* fs.writeFileString(target, "someone else again")
      const report2 = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite() })
      assert.deepStrictEqual(report2.operations.map((o) => [o.runId, o.outcome, o.reason]), [
        [prior.runId, "parked", "reconcile_matches_prior_state"],
        [diverged.runId, "parked", "reconcile_diverged"]
      ])
      assert.strictEqual(yield* fs.readFileString(target), "someone else again", "outside changes are never overwritten")
      assert.strictEqual(reconcileExitCode(report2), 1)
    }).pipe(Effect.provide(Layer.merge(stores, files))))

  it.scoped("observe_failed: a missing root writes nothing and is tried again next time", () =>
    Effect.gen(function*() {
      const { fs, root, target } = yield* fixture
      const { runId } = yield* fileRun(root, "fw-missing", "hello")
      const store = yield* RuntimeEventStore
      const before = yield* store.highWater(runId)
      const report = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite({ root: join(root, "gone") }) })
      assert.deepStrictEqual(report.operations.map((o) => [o.outcome, o.reason]), [["left", "observe_failed"]])
      assert.deepStrictEqual(yield* store.highWater(runId), before)
      yield* fs.writeFileString(target, "hello")
      const again = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite() })
      assert.strictEqual(again.operations[0]!.reason, "reconcile_matches_expected_state")
    }).pipe(Effect.provide(Layer.merge(stores, files))))
})

describe("reconcile at a host's start and under the owner lock (docs/spec/05-reconciliation.md)", () => {
  const owned = Layer.mergeAll(stores, files, NodeWorkspaceOwner.layerNode)

  it.scoped("startup = repair → reconcile → continuation in one exclusive hold: an interrupted run is sealed, its operation settled, then the continuation runs", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-start-" })
      const { runId } = yield* setup("crashed", [{ callId: "c1", mode: "read_only" }], { sealed: false })
      const { tool, runs } = counting("read_only")
      const owner = yield* WorkspaceOwner
      const started = yield* HostStartup.start(ws, {
        repair: HostStartup.startupSteps({
          tools: [tool],
          // Inside the same hold: the lock is still held exclusively, and the operation is already settled.
          continuation: Effect.gen(function*() {
            return { probe: yield* owner.probe(ws), decision: (yield* decisionOf(runId, "c1")).decision }
          })
        })
      })
      assert.strictEqual(started.repair._tag, "Ran")
      if (started.repair._tag !== "Ran") return
      const steps = started.repair.result
      assert.deepStrictEqual(steps.repair.repaired.map((r) => r.action), ["interrupted_run_closed"])
      assert.isTrue(Either.isRight(steps.reconcile))
      assert.deepStrictEqual(Either.getOrThrow(steps.reconcile).operations.map((o) => o.reason), ["reexecuted_read_only"])
      assert.deepStrictEqual(steps.continuation, { probe: "held", decision: "completed" })
      assert.strictEqual(runs.length, 1)
    }).pipe(Effect.provide(owned)))

  it.scoped("a host that skips repair (the lock held shared by another host or a resolve) skips reconcile too", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-skip-" })
      yield* setup("waiting", [{ callId: "c1", mode: "read_only" }])
      const { tool, runs } = counting("read_only")
      const owner = yield* WorkspaceOwner
      yield* owner.acquire(ws, "shared")
      const started = yield* HostStartup.start(ws, { repair: HostStartup.startupSteps({ tools: [tool] }) })
      assert.deepStrictEqual(started.repair, { _tag: "Skipped", reason: "owner_held_shared" })
      assert.strictEqual(runs.length, 0)
    }).pipe(Effect.provide(owned)))

  it.scoped("an unreadable run at a host's start is reported and the start goes on", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-unr-" })
      const bad = yield* setup("bad", [{ callId: "c1", mode: "read_only" }])
      yield* setup("good", [{ callId: "c1", mode: "read_only" }])
      const store = yield* RuntimeEventStore
      const broken = RuntimeEventStore.of({
        ...store,
        readRun: (runId, options) =>
          runId === bad.runId
            ? Effect.fail(new LedgerCorruption({ runId, reason: "torn_row", seq: 3, message: "torn" }))
            : store.readRun(runId, options),
        readRowsAt: (runId, seqs) =>
          runId === bad.runId
            ? Effect.fail(new LedgerCorruption({ runId, reason: "torn_row", seq: 3, message: "torn" }))
            : store.readRowsAt(runId, seqs)
      })
      const { tool } = counting("read_only")
      const started = yield* HostStartup.start(ws, {
        repair: HostStartup.startupSteps({ tools: [tool], continuation: Effect.succeed("continued") }).pipe(
          Effect.provideService(RuntimeEventStore, broken)
        )
      })
      assert.strictEqual(started.repair._tag, "Ran")
      if (started.repair._tag !== "Ran") return
      const report = Either.getOrThrow(started.repair.result.reconcile)
      assert.deepStrictEqual(report.unreadable.map((u) => u.runId), ["bad"])
      assert.strictEqual(started.repair.result.continuation, "continued")
    }).pipe(Effect.provide(owned)))

  it.scoped("the CLI's reconcile takes the owner lock exclusively: with a host holding it shared it fails WorkspaceLocked and runs nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-excl-" })
      const owner = yield* WorkspaceOwner
      yield* owner.acquire(ws, "shared")
      const error = yield* Effect.flip(
        Effect.flatMap(WorkspaceOwner, (o) => o.withExclusive(ws, Reconcile.reconcile({})))
      )
      assert.strictEqual(error._tag, "WorkspaceLocked")
    }).pipe(Effect.provide(owned)))
})
