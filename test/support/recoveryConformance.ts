// The recovery writer's part of the store conformance suite (docs/spec/05-reconciliation.md): `appendRecovery` on every store layer.
// Sealed runs only, the seven bundle shapes, every rule on write (nothing written), exact retries, cut reads, restore.
import { NodeContext } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Effect, Either, Layer, Stream } from "effect"
import type { Scope } from "effect"
import { RunId } from "../../src/Domain/Ids.js"
import type { RecoveryMode, RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import * as LedgerRules from "../../src/Domain/Rules/LedgerRules.js"
import * as RecoveryBundle from "../../src/Domain/Rules/RecoveryBundle.js"
import * as RecoveryResolver from "../../src/Domain/Rules/RecoveryResolver.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../../src/Services/RuntimeEventStore.js"
import type { ConformanceTarget } from "./conformance.js"

const rid = (s: string) => RunId.make(s)

const withStore = <A, E>(
  target: ConformanceTarget,
  f: (store: RuntimeEventStoreShape, workspace: string) => Effect.Effect<A, E, Scope.Scope | FileSystem.FileSystem>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-rec-" })
    const store = yield* reopen(target, workspace)
    return yield* f(store, workspace)
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const reopen = (target: ConformanceTarget, workspace: string) =>
  Layer.build(target.layer(workspace)).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))

const refusedWith = (exit: Either.Either<unknown, { readonly _tag: string }>, tag: string, reason?: string, says?: string) => {
  assert.isTrue(Either.isLeft(exit), `expected ${tag}${reason ? `(${reason})` : ""} but the append succeeded`)
  const err = (exit as Either.Left<{ _tag: string; reason?: string; message?: string }, unknown>).left
  assert.strictEqual(err._tag, tag, err.message)
  if (reason !== undefined) assert.strictEqual(err.reason, reason, err.message)
  if (says !== undefined) assert.include(err.message ?? "", says)
}

/** The evidence every reconcilable dispatch of these tests records, and its digest. */
export const EVIDENCE = { tool: "test/evidence@1", before: null, after: "sha256:" + "a".repeat(64) }
/** The digest of `EVIDENCE`. */
export const EVIDENCE_DIGEST = Either.getOrThrow(LedgerRules.evidenceDigest(EVIDENCE))

/** A call of a sealed run: its id, its recorded mode (or none: not dispatched). */
export interface CallSpec {
  readonly callId: string
  readonly mode?: RecoveryMode
  readonly hidden?: true
}

/**
 * Builds a run of `calls` (each dispatched in its mode, or only called), sealed by a `failed` terminal unless
 * `sealed` is false. Returns the builder and the call events.
 */
export const sealedRun = (
  store: RuntimeEventStoreShape,
  name: string,
  calls: ReadonlyArray<CallSpec>,
  options: { readonly boundary?: "none" | "t1_after_preflight_v1"; readonly sealed?: boolean } = {}
) =>
  Effect.gen(function*() {
    const b = EventBuilder.make(name)
    const r = rid(name)
    const boundary = options.boundary ?? "t1_after_preflight_v1"
    yield* store.append(r, [b.opened(boundary), b.user("go")])
    const events = new Map<string, RuntimeEvent>()
    for (const spec of calls) {
      const call = b.call(spec.callId, "Tool", { n: spec.callId }, spec.hidden ? { hidden: true } : undefined)
      events.set(spec.callId, call)
      if (spec.mode === undefined) {
        yield* store.append(r, [call])
      } else {
        const dispatch = b.dispatched(spec.callId, "Tool", { n: spec.callId }, spec.mode, {
          ...(spec.mode === "reconcilable" ? { evidence: EVIDENCE } : {}),
          ...(spec.hidden ? { hidden: true as const } : {})
        })
        yield* store.appendDispatch(r, { call, dispatch })
      }
    }
    if (options.sealed !== false) yield* store.append(r, [b.terminated("failed", "process_interrupted")])
    return { b, r, call: (callId: string) => events.get(callId)! }
  })

const at = { ts: 5 }
const person = { ts: 6, actor: "alice" }

/** The recovery writer's conformance cases, for one store target. */
export const recoveryConformance = (target: ConformanceTarget) =>
  describe("appendRecovery (docs/spec/05-reconciliation.md)", () => {
    it.live("refuses a run that is not sealed with RunNotSealed and writes nothing", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-open", [{ callId: "c1", mode: "never_auto_retry" }], { sealed: false })
          const before = yield* store.highWater(r)
          const refused = yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("c1"), person)).pipe(Effect.either)
          refusedWith(refused, "RunNotSealed")
          assert.deepStrictEqual(yield* store.highWater(r), before)
        })))

    it.live("writes the seven bundle shapes as one group each; they read back clean and the call index keeps the last decision", () =>
      withStore(target, (store, workspace) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-seven", [
            { callId: "proven", mode: "reconcilable" },
            { callId: "diverged", mode: "reconcilable" },
            { callId: "ro", mode: "read_only" },
            { callId: "idem", mode: "idempotent" },
            { callId: "retry", mode: "never_auto_retry" },
            { callId: "aborted", mode: "never_auto_retry", hidden: true }
          ])
          const bundles: Array<ReadonlyArray<RuntimeEvent>> = [
            RecoveryBundle.reconcileCompleted(call("proven"), { ...at, evidenceDigest: EVIDENCE_DIGEST, result: { ok: 1 } }),
            RecoveryBundle.reconcileParked(call("diverged"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }),
            RecoveryBundle.reexecutedReadOnly(call("ro"), { ...at, result: "read" }),
            RecoveryBundle.reexecutedIdempotent(call("idem"), {
              ...at,
              result: "again",
              idempotencyKey: RecoveryBundle.operationIdOf(call("idem"))
            }),
            RecoveryBundle.manualRetry(call("retry"), person),
            RecoveryBundle.manualAbort(call("aborted"), person),
            // A person settles the reconciler park: the last bundle decides.
            RecoveryBundle.manualEdit(call("diverged"), { ...person, result: { edited: true } })
          ]
          let seq = (yield* store.highWater(r)).seq
          for (const bundle of bundles) {
            const rows = yield* store.appendRecovery(r, bundle)
            assert.deepStrictEqual(rows.map((x) => x.seq), bundle.map((_, i) => seq + 1 + i))
            assert.isTrue(rows.every((x) => x.end === seq + bundle.length))
            seq += bundle.length
          }
          const read = yield* store.readRun(r)
          assert.strictEqual(read.length, seq)
          assert.strictEqual(read[read.length - 1]!.event.id, RecoveryBundle.bundleIds(RecoveryBundle.operationIdOf(call("diverged")), "manual").decided)
          const expected: Record<string, [string | undefined, string | undefined, string | undefined]> = {
            proven: ["reconciler", "completed", "reconcile_matches_expected_state"],
            diverged: ["manual", "completed", "manual_edit"],
            ro: ["reconciler", "completed", "reexecuted_read_only"],
            idem: ["reconciler", "completed", "reexecuted_idempotent"],
            retry: ["manual", "completed", "manual_retry"],
            aborted: ["manual", "parked", "manual_abandon"]
          }
          const stores = target.persistent ? [store, yield* reopen(target, workspace)] : [store]
          for (const s of stores) {
            for (const [callId, [kind, disposition, reason]] of Object.entries(expected)) {
              const state = yield* s.toolCallState(r, callId)
              assert.deepStrictEqual([state.call?.recovery?.kind, state.call?.recovery?.disposition, state.call?.recovery?.reasonCode], [kind, disposition, reason], callId)
            }
            const idem = yield* s.toolCallState(r, "idem")
            assert.strictEqual(idem.call?.recoveryMode, "idempotent")
            assert.strictEqual(idem.call?.idempotencyKey, RecoveryBundle.operationIdOf(call("idem")))
            assert.strictEqual((yield* s.toolCallState(r, "proven")).call?.evidenceDigest, EVIDENCE_DIGEST)
            const resolved = yield* RecoveryResolver.resolveStream(s.readRunPages(r, 3))
            assert.deepStrictEqual(
              resolved.operations.map((o) => [o.callId, o.decision]),
              [["proven", "completed"], ["diverged", "completed"], ["ro", "completed"], ["idem", "completed"], ["retry", "completed"], ["aborted", "parked"]]
            )
          }
        })))

    it.live("every rule of 05 is checked on write: AppendRejected, and nothing is written", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const { b, call, r } = yield* sealedRun(store, "run-rules", [
            { callId: "rec", mode: "reconcilable" },
            { callId: "never", mode: "never_auto_retry" },
            { callId: "idem", mode: "idempotent" },
            { callId: "ro", mode: "read_only" },
            { callId: "undispatched" },
            { callId: "hid", mode: "read_only", hidden: true }
          ])
          const op = (c: string) => RecoveryBundle.operationIdOf(call(c))
          const cases: Array<[string, ReadonlyArray<RuntimeEvent>, string]> = [
            ["a reconciler bundle of a never_auto_retry operation", RecoveryBundle.reexecutedReadOnly(call("never"), { ...at, result: 1 }), "recovery_fact_invalid"],
            ["an observation of a read_only operation", RecoveryBundle.reconcileParked(call("ro"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }), "recovery_fact_invalid"],
            ["an evidence digest that is not the dispatch's", RecoveryBundle.reconcileParked(call("rec"), { ...at, evidenceDigest: "sha256:" + "b".repeat(64), observation: "diverged" }), "recovery_fact_invalid"],
            ["an idempotent re-run with another key", RecoveryBundle.reexecutedIdempotent(call("idem"), { ...at, result: 1, idempotencyKey: "other" }), "recovery_fact_invalid"],
            ["a read_only re-run decided as idempotent", [
              RecoveryBundle.reexecutedReadOnly(call("ro"), { ...at, result: 1 })[0]!,
              RecoveryBundle.reexecutedIdempotent(call("ro"), { ...at, result: 1, idempotencyKey: "k" })[1]!
            ], "recovery_fact_invalid"],
            ["a park reason that does not match the observation", [
              RecoveryBundle.reconcileParked(call("rec"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" })[0]!,
              RecoveryBundle.reconcileParked(call("rec"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "matches_prior_state" })[1]!
            ], "recovery_fact_invalid"],
            ["a bundle cut before its decision", RecoveryBundle.reconcileCompleted(call("rec"), { ...at, evidenceDigest: EVIDENCE_DIGEST, result: 1 }).slice(0, 2), "recovery_fact_invalid"],
            ["a decision before its response", RecoveryBundle.manualEdit(call("never"), { ...person, result: 1 }).slice().reverse(), "recovery_fact_invalid"],
            ["two bundles in one write", [...RecoveryBundle.manualAbort(call("never"), person), ...RecoveryBundle.manualAbort(call("idem"), person)], "recovery_fact_invalid"],
            ["events of two operations in one bundle", [
              RecoveryBundle.manualEdit(call("never"), { ...person, result: 1 })[0]!,
              RecoveryBundle.manualEdit(call("idem"), { ...person, result: 1 })[1]!
            ], "recovery_fact_invalid"],
            ["a manual retry whose response is not an error", [
              RecoveryBundle.manualEdit(call("never"), { ...person, result: 1 })[0]!,
              b.custom(
                new (RecoveryBundle.manualRetry(call("never"), person)[1]!.body.constructor as any)({
                  ...RecoveryBundle.manualRetry(call("never"), person)[1]!.body,
                  outcomeEventId: RecoveryBundle.bundleIds(op("never"), "manual").response
                }),
                { id: RecoveryBundle.bundleIds(op("never"), "manual").decided }
              )
            ], "recovery_fact_invalid"],
            ["a bundle for a call a t1 run never dispatched", RecoveryBundle.manualAbort(call("undispatched"), person), "recovery_fact_invalid"],
            ["a bundle whose hidden flag is not its call's", RecoveryBundle.reexecutedReadOnly(call("ro"), { ...at, result: 1 }).map((e) =>
              b.custom(e.body, { id: e.id, hidden: true })
            ), "recovery_fact_invalid"],
            ["a bundle that is not a recovery fact", [b.model("hello")], "recovery_fact_invalid"],
            ["a bundle for an unknown call", RecoveryBundle.manualAbort(b.call("ghost", "Tool", {}), person), "recovery_fact_invalid"]
          ]
          const before = yield* store.highWater(r)
          const good = RecoveryBundle.reexecutedReadOnly(call("hid"), { ...at, result: 1 })
          for (const [what, events, reason] of cases) {
            const refused = yield* store.appendRecovery(r, events).pipe(Effect.either)
            assert.isTrue(Either.isLeft(refused), `${what}: accepted`)
            refusedWith(refused, "AppendRejected", reason)
            assert.deepStrictEqual(yield* store.highWater(r), before, what)
            // Group commit (a store that has it): the same bundle after a good one refuses the group, nothing written.
            if (store.appendRecoveryBatch !== undefined) {
              const group = yield* store.appendRecoveryBatch(r, [good, events]).pipe(Effect.either)
              assert.isTrue(Either.isLeft(group), `${what}: accepted in a group`)
              refusedWith(group, "AppendRejected", reason)
              assert.deepStrictEqual(yield* store.highWater(r), before, `${what} (group)`)
            }
          }
          // A generic append of a recovery fact stays reserved (the sealed run refuses it first).
          refusedWith(yield* store.append(r, RecoveryBundle.manualAbort(call("never"), person)).pipe(Effect.either), "RunSealed")
          // The hidden call's bundle copies its hidden flag, and is accepted.
          yield* store.appendRecovery(r, RecoveryBundle.reexecutedReadOnly(call("hid"), { ...at, result: 1 }))
          assert.strictEqual((yield* store.readRun(r)).length, before.seq + 2)
        })))

    it.live("an exact retry converges; any other second bundle is refused, naming the decision already recorded", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-retry", [
            { callId: "c1", mode: "never_auto_retry" },
            { callId: "c2", mode: "reconcilable" },
            { callId: "c3", mode: "read_only" }
          ])
          const bundle = RecoveryBundle.manualAbort(call("c1"), person)
          const rows = yield* store.appendRecovery(r, bundle)
          const again = yield* store.appendRecovery(r, bundle)
          assert.deepStrictEqual(again.map((x) => [x.seq, x.digest]), rows.map((x) => [x.seq, x.digest]))
          assert.strictEqual((yield* store.highWater(r)).seq, rows[0]!.seq)
          // Same ids, another ts (a new process): not exact, refused naming the recorded decision.
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("c1"), { ...person, ts: 7 })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid",
            "manual decision parked (manual_abandon) by alice"
          )
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("c1"), { ...person, result: 1 })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid",
            "manual decision parked (manual_abandon)"
          )
          // A reconciler park, then a second reconciler bundle: refused; a manual one: accepted; then nothing.
          yield* store.appendRecovery(r, RecoveryBundle.reconcileParked(call("c2"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "matches_prior_state" }))
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.reconcileCompleted(call("c2"), { ...at, evidenceDigest: EVIDENCE_DIGEST, result: 1 })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid",
            "reconciler decision parked (reconcile_matches_prior_state)"
          )
          yield* store.appendRecovery(r, RecoveryBundle.manualRetry(call("c2"), person))
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("c2"), { ...person, actor: "bob" })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid",
            "manual decision completed (manual_retry) by alice"
          )
          // Nothing settles an operation after a completed reconciler bundle; the exact retry is no longer the tail.
          yield* store.appendRecovery(r, RecoveryBundle.reexecutedReadOnly(call("c3"), { ...at, result: 1 }))
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("c3"), { ...person, result: 2 })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid",
            "reconciler decision completed (reexecuted_read_only)"
          )
          refusedWith(yield* store.appendRecovery(r, bundle).pipe(Effect.either), "AppendRejected", "recovery_fact_invalid")
          yield* store.readRun(r)
        })))

    it.live("unsettledOperations lists reconcile's candidates from the call index: dispatched, no response, no bundle", () =>
      withStore(target, (store, workspace) =>
        Effect.gen(function*() {
          const a = yield* sealedRun(store, "run-u1", [
            { callId: "c1", mode: "reconcilable" },
            { callId: "c2", mode: "read_only" },
            { callId: "c3" },
            { callId: "c4", mode: "never_auto_retry" }
          ])
          const b = yield* sealedRun(store, "run-u2", [{ callId: "d1", mode: "idempotent" }], { sealed: false })
          const list = (runId?: string) =>
            Effect.map(store.unsettledOperations(runId === undefined ? undefined : rid(runId)), (ops) => ops.map((o) => `${o.runId}/${o.call.callId}`))
          assert.deepStrictEqual(yield* list(), ["run-u1/c1", "run-u1/c2", "run-u1/c4", "run-u2/d1"])
          const d1 = (yield* store.unsettledOperations(b.r))[0]!.call
          assert.deepStrictEqual([d1.recoveryMode, d1.idempotencyKey], ["idempotent", RecoveryBundle.operationIdOf(b.call("d1"))])
          yield* store.appendRecovery(a.r, RecoveryBundle.reconcileParked(a.call("c1"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
          yield* store.appendRecovery(a.r, RecoveryBundle.reexecutedReadOnly(a.call("c2"), { ...at, result: 1 }))
          assert.deepStrictEqual(yield* list("run-u1"), ["run-u1/c4"])
          assert.deepStrictEqual(yield* list("no-such-run"), [])
          if (target.persistent) {
            const reopened = yield* reopen(target, workspace)
            assert.deepStrictEqual((yield* reopened.unsettledOperations()).map((o) => `${o.runId}/${o.call.callId}`), ["run-u1/c4", "run-u2/d1"])
          }
        })))

    it.live("readRun(upToSeq) that cuts a bundle is recovery_fact_invalid at the bundle's first seq", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-cut", [{ callId: "c1", mode: "reconcilable" }])
          const rows = yield* store.appendRecovery(r, RecoveryBundle.reconcileCompleted(call("c1"), { ...at, evidenceDigest: EVIDENCE_DIGEST, result: 1 }))
          for (const upTo of [rows[0]!.seq, rows[1]!.seq]) {
            const cut = yield* store.readRun(r, { upToSeq: upTo }).pipe(Effect.either)
            refusedWith(cut, "LedgerCorruption", "recovery_fact_invalid")
            assert.strictEqual((cut as Either.Left<{ seq?: number }, unknown>).left.seq, rows[0]!.seq)
          }
          assert.strictEqual((yield* store.readRun(r, { upToSeq: rows[0]!.seq - 1 })).length, rows[0]!.seq - 1)
          assert.strictEqual((yield* store.readRun(r, { upToSeq: rows[2]!.seq })).length, rows[2]!.seq)
        })))

    it.live("a none-boundary run: a manual bundle settles a call with no dispatch; a reconciler bundle cannot", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-none", [{ callId: "c1" }, { callId: "c2" }], { boundary: "none" })
          refusedWith(
            yield* store.appendRecovery(r, RecoveryBundle.reexecutedReadOnly(call("c1"), { ...at, result: 1 })).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid"
          )
          yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("c1"), { ...person, result: "done" }))
          yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("c2"), person))
          const state = yield* store.toolCallState(r, "c1")
          assert.strictEqual(state.call?.recovery?.reasonCode, "manual_edit")
        })))

    it.live("restore carries bundles (regrouped) and what it writes reads back clean; export carries them out", () =>
      withStore(target, (store, workspace) =>
        Effect.gen(function*() {
          const { call, r } = yield* sealedRun(store, "run-x", [{ callId: "c1", mode: "reconcilable" }, { callId: "c2", mode: "never_auto_retry" }])
          yield* store.appendRecovery(r, RecoveryBundle.reconcileParked(call("c1"), { ...at, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
          yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("c1"), { ...person, result: 1 }))
          yield* store.appendRecovery(r, RecoveryBundle.manualAbort(call("c2"), person))
          const exported = Chunk.toReadonlyArray(yield* Stream.runCollect(store.exportRows()))
          const events = exported.filter((x) => x.event.runId === "run-x").map((x) => x.event)
          assert.strictEqual(events.length, (yield* store.highWater(r)).seq)
          // Into a fresh store as ONE restore-mode group (import regroups): bundles are recognized by shape.
          const fs = yield* FileSystem.FileSystem
          const other = yield* reopen(target, yield* fs.makeTempDirectoryScoped({ prefix: "rr-rec-import-" }))
          yield* other.appendBatch([{ runId: r, events }], { mode: "restore" })
          const back = yield* other.readRun(r)
          assert.deepStrictEqual(back.map((x) => x.digest), exported.filter((x) => x.event.runId === "run-x").map((x) => x.digest))
          assert.strictEqual((yield* other.toolCallState(r, "c1")).call?.recovery?.reasonCode, "manual_edit")
          // The restored index refuses what the original refuses.
          refusedWith(
            yield* other.appendRecovery(r, RecoveryBundle.manualRetry(call("c2"), person)).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid"
          )
          // A restore that ends inside a bundle is refused.
          const third = yield* reopen(target, yield* fs.makeTempDirectoryScoped({ prefix: "rr-rec-import2-" }))
          refusedWith(
            yield* third.appendBatch([{ runId: r, events: events.slice(0, events.length - 2) }], { mode: "restore" }).pipe(Effect.either),
            "AppendRejected",
            "recovery_fact_invalid"
          )
          void workspace
        })))
  })
