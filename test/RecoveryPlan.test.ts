// Plans after recovery (docs/spec/05-reconciliation.md): the ToolOperation's `recovery`, the resolver's decision, the replay with recovered
// responses, parked operations keeping the run blocked, and `inspect` showing an abandoned run and by whom.
import { assert, describe, it } from "@effect/vitest"
import { NodeContext } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { Chunk, Effect, Either, Stream } from "effect"
import { exportText } from "../src/Programs/ExportLedger.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import { decide } from "../src/Domain/Rules/Decide.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { CommittedRow, RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as Digest from "../src/Domain/Digest.js"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"

const T1 = "t1_after_preflight_v1"

const commit = (runId: string, events: ReadonlyArray<RuntimeEvent>): Array<CommittedRow> => {
  let d = Digest.genesis(runId)
  return events.map((event, i) => {
    d = Digest.next(d, i + 1, Either.getOrThrow(canonicalText(event)))
    return { seq: i + 1, digest: d, end: i + 1, event } as unknown as CommittedRow
  })
}

const evidence = { tool: "t", path: "a" }
const digest = Either.getOrThrow(LedgerRules.evidenceDigest(evidence))

const sealedRun = (name: string) => {
  const b = EventBuilder.make(name)
  const events = [
    b.opened(T1),
    b.user("go"),
    b.call("c1", "write", { p: 1 }),
    b.dispatched("c1", "write", { p: 1 }, "reconcilable", { evidence }),
    b.call("c2", "read", { p: 2 }),
    b.dispatched("c2", "read", { p: 2 }, "read_only"),
    b.terminated("failed", "process_interrupted")
  ]
  return { b, events, c1: events[2]!, c2: events[4]! }
}

describe("plans after recovery", () => {
  it("a completed bundle settles its operation: recovery info, origin recovery_bundle, call and recovered response replayed in seq order", () => {
    const { c1, c2, events } = sealedRun("r")
    const b1 = RecoveryBundle.reconcileCompleted(c1, { ts: 1, evidenceDigest: digest, result: { path: "a", bytes: 1 } })
    const b2 = RecoveryBundle.reexecutedReadOnly(c2, { ts: 1, result: "contents" })
    const rows = commit("r", [...events, ...b2, ...b1])
    const resolved = Either.getOrThrow(RecoveryResolver.resolve(rows))
    const d1 = resolved.operations[0]!
    assert.deepStrictEqual([d1.decision, d1.reason, d1.origin, d1.responseSeq, d1.isError], ["completed", "recovery_bundle_completed", "recovery_bundle", 11, false])
    assert.deepStrictEqual([d1.recovery?.disposition, d1.recovery?.reasonCode, d1.recovery?.provenance.kind, d1.recovery?.provenance.actor, d1.recovery?.decidedSeq], [
      "completed",
      "reconcile_matches_expected_state",
      "reconciler",
      "reconcile:write",
      12
    ])
    const plan = Either.getOrThrow(planResume(rows).pipe(Effect.either, Effect.runSync))
    assert.strictEqual(plan.decision, "safe_replay")
    assert.deepStrictEqual(plan.operations.map((o) => [o.callId, o.status, o.recovery?.reasonCode]), [["c1", "succeeded", "reconcile_matches_expected_state"], ["c2", "succeeded", "reexecuted_read_only"]])
    // Seq order: the second call's recovered response comes before the first's (a provider pairs them by callId).
    assert.deepStrictEqual(plan.replay.map((r) => r.id), [events[1]!.id, c1.id, c2.id, b2[0]!.id, b1[1]!.id])
    assert.strictEqual(decide(plan), "safe_replay")
  })

  it("a parked operation keeps the run blocked (dangling_tool_state); a manual edit after the park decides", () => {
    const { c1, c2, events } = sealedRun("p")
    const park = RecoveryBundle.reconcileParked(c1, { ts: 1, evidenceDigest: digest, observation: "matches_prior_state" })
    const ro = RecoveryBundle.reexecutedReadOnly(c2, { ts: 1, result: 1 })
    const parkedPlan = Either.getOrThrow(planResume(commit("p", [...events, ...ro, ...park])).pipe(Effect.either, Effect.runSync))
    assert.deepStrictEqual([parkedPlan.decision, [...parkedPlan.reasons]], ["blocked", ["dangling_tool_state"]])
    assert.deepStrictEqual([parkedPlan.operations[0]!.status, parkedPlan.operations[0]!.recovery?.reasonCode], ["parked", "reconcile_matches_prior_state"])
    assert.notInclude(parkedPlan.replay.map((r) => r.id), c1.id)
    const edit = RecoveryBundle.manualEdit(c1, { ts: 2, actor: "alice", result: "fixed", isError: true })
    const settled = Either.getOrThrow(planResume(commit("p", [...events, ...ro, ...park, ...edit])).pipe(Effect.either, Effect.runSync))
    assert.strictEqual(settled.decision, "safe_replay")
    assert.deepStrictEqual(
      [settled.operations[0]!.status, settled.operations[0]!.recovery?.reasonCode, settled.operations[0]!.recovery?.provenance.actor],
      ["failed", "manual_edit", "alice"]
    )
  })

  it.effect("inspect shows a run whose only unsettled operations are manual_abandon parks as abandoned, by whom, and blocked", () =>
    Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      const { c1, c2, events } = sealedRun("ab")
      yield* store.appendBatch([{ runId: events[0]!.runId, events }], { mode: "restore" })
      yield* store.appendRecovery(events[0]!.runId, RecoveryBundle.manualAbort(c1, { ts: 1, actor: "alice" }))
      const before = yield* inspectWorkspace()
      assert.strictEqual(before.runs[0]!.abandoned, undefined, "c2 is still indeterminate")
      yield* store.appendRecovery(events[0]!.runId, RecoveryBundle.manualAbort(c2, { ts: 1, actor: "bob" }))
      const after = yield* inspectWorkspace()
      const run = after.runs[0]!
      assert.strictEqual(run.decision, "blocked")
      assert.deepStrictEqual(run.abandoned, { by: ["alice", "bob"] })
      const op = run.plan!.operations[0]!
      assert.deepStrictEqual(op.recovery, { disposition: "parked", reasonCode: "manual_abandon", provenance: { kind: "manual", actor: "alice" }, decidedSeq: 8 })
    }).pipe(Effect.provide(MemoryRuntimeEventStore.layer)))

  it.scoped("export carries bundles out and import restores them (store lines and bare events); a file cut inside a bundle is refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-bundle-io-" })
      const { c1, c2, events } = sealedRun("io")
      const b1 = RecoveryBundle.reconcileParked(c1, { ts: 1, evidenceDigest: digest, observation: "diverged" })
      const b2 = RecoveryBundle.manualEdit(c1, { ts: 2, actor: "alice", result: "fixed" })
      const b3 = RecoveryBundle.reexecutedReadOnly(c2, { ts: 3, result: 1 })
      const source = yield* Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        yield* store.appendBatch([{ runId: events[0]!.runId, events }], { mode: "restore" })
        for (const bundle of [b1, b2, b3]) yield* store.appendRecovery(events[0]!.runId, bundle)
        const text = Chunk.join(yield* Stream.runCollect(exportText()), "")
        return { text, rows: yield* store.readRun(events[0]!.runId) }
      }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))
      const all = [...events, ...b1, ...b2, ...b3]
      yield* fs.writeFileString(`${dir}/rows.jsonl`, source.text)
      yield* fs.writeFileString(`${dir}/events.jsonl`, all.map((e) => Either.getOrThrow(canonicalText(e))).join("\n") + "\n")
      yield* fs.writeFileString(`${dir}/cut.jsonl`, all.slice(0, all.length - 1).map((e) => Either.getOrThrow(canonicalText(e))).join("\n") + "\n")
      for (const file of ["rows.jsonl", "events.jsonl"]) {
        yield* Effect.gen(function*() {
          const store = yield* RuntimeEventStore
          const imported = yield* importLedger(`${dir}/${file}`)
          assert.strictEqual(imported.added, all.length, file)
          const back = yield* store.readRun(events[0]!.runId)
          assert.deepStrictEqual(back.map((r) => r.digest), source.rows.map((r) => r.digest), file)
          const state = yield* store.toolCallState(events[0]!.runId, "c1")
          assert.deepStrictEqual([state.call?.recovery?.reasonCode, state.call?.recovery?.actor], ["manual_edit", "alice"], file)
          // The restored index keeps the rules: c2 is settled, nothing settles it again.
          const again = yield* store.appendRecovery(events[0]!.runId, RecoveryBundle.manualAbort(c2, { ts: 4, actor: "bob" })).pipe(Effect.either)
          assert.isTrue(Either.isLeft(again))
        }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))
      }
      const cut = yield* importLedger(`${dir}/cut.jsonl`).pipe(Effect.flip, Effect.provide(MemoryRuntimeEventStore.layer))
      assert.deepStrictEqual([cut._tag, (cut as { reason?: string }).reason], ["ImportInvalid", "recovery_fact_invalid"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
