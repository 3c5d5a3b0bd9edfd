// The recovery writer on PostgreSQL (docs/spec/05-reconciliation.md) where only a server store can be tested: two hosts (two pools) settling
// one operation at once, the call index read by `unsettledCalls`, and a format 1 workspace migrated to format 2.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { RunId } from "../src/Domain/Ids.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import { PG_FORMAT_VERSION } from "../src/Layers/internal/pgConnection.js"
import { pgUrl, rawClient } from "./support/pg.js"
import { EVIDENCE_DIGEST, sealedRun } from "./support/recoveryConformance.js"

const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

const openStore = (workspace: string, readOnly = false) =>
  PgRuntimeEventStore.make({ url: pgUrl(), workspace, ...(readOnly ? { readOnly: true } : {}) })


describe("PgRuntimeEventStore: the recovery writer across hosts", () => {
  it.scopedLive("two pools settling one operation at once: exactly one bundle commits, the other is refused naming it", () =>
    Effect.gen(function*() {
      const name = freshName("settle")
      const one = yield* openStore(name)
      const two = yield* openStore(name)
      for (let round = 0; round < 8; round++) {
        const { call, r } = yield* sealedRun(one, `run-settle-${round}`, [{ callId: "c1", mode: "never_auto_retry" }])
        const edit = RecoveryBundle.manualEdit(call("c1"), { ts: 6, actor: "alice", result: { kept: round } })
        const abort = RecoveryBundle.manualAbort(call("c1"), { ts: 6, actor: "bob" })
        const results = yield* Effect.all([Effect.either(one.appendRecovery(r, edit)), Effect.either(two.appendRecovery(r, abort))], {
          concurrency: "unbounded"
        })
        assert.strictEqual(results.filter(Either.isRight).length, 1, `round ${round}: not exactly one bundle committed`)
        const won = Either.isRight(results[0]!) ? "completed (manual_edit) by alice" : "parked (manual_abandon) by bob"
        const loser = results.find(Either.isLeft) as Either.Left<{ _tag: string; reason?: string; message: string }, unknown>
        assert.strictEqual(loser.left._tag, "AppendRejected", loser.left.message)
        assert.strictEqual(loser.left.reason, "recovery_fact_invalid", loser.left.message)
        assert.include(loser.left.message, `manual decision ${won}`)
        // One bundle on the ledger, read back clean from either host; the call index keeps the winner's decision.
        const rows = yield* two.readRun(r)
        const winner = results.find(Either.isRight)!.right
        assert.strictEqual(rows.length, winner[winner.length - 1]!.seq)
        const state = yield* one.toolCallState(r, "c1")
        assert.strictEqual(state.call?.recovery?.actor, Either.isRight(results[0]!) ? "alice" : "bob")
        assert.deepStrictEqual(yield* two.unsettledOperations(r), [])
      }
    }))

  it.scopedLive("unsettledCalls: calls without a response, in call order, with their recovery state", () =>
    Effect.gen(function*() {
      const store = yield* openStore(freshName("unsettled"))
      const { b, call, r } = yield* sealedRun(store, "run-u", [
        { callId: "answered", mode: "read_only" },
        { callId: "indeterminate", mode: "read_only" },
        { callId: "never" },
        { callId: "parked", mode: "reconcilable" },
        { callId: "edited", mode: "never_auto_retry" }
      ], { sealed: false })
      yield* store.appendOutcome(r, b.response("answered", "Tool", "ok", { operationBound: true }))
      yield* store.append(r, [b.terminated("failed", "process_interrupted")])
      yield* store.appendRecovery(r, RecoveryBundle.reconcileParked(call("parked"), { ts: 1, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
      yield* store.appendRecovery(r, RecoveryBundle.manualEdit(call("edited"), { ts: 1, actor: "alice", result: 1 }))
      const u = yield* store.unsettledCalls(r)
      assert.strictEqual(u.toolBoundary, "t1_after_preflight_v1")
      assert.isNumber(u.terminalSeq)
      assert.deepStrictEqual(u.calls.map((c) => [c.callId, c.recoveryMode ?? null, c.recovery?.reasonCode ?? null]), [
        ["indeterminate", "read_only", null],
        ["never", null, null],
        ["parked", "reconcilable", "reconcile_diverged"]
      ])
      assert.strictEqual(u.calls[2]!.evidenceDigest, EVIDENCE_DIGEST)
      assert.deepStrictEqual((yield* store.unsettledOperations()).map((o) => o.call.callId), ["indeterminate"])
      assert.deepStrictEqual(yield* store.unsettledCalls(RunId.make("no-such-run")), { toolBoundary: undefined, terminalSeq: undefined, calls: [] })
    }))

  it.scopedLive("a format 1 workspace: read-only it reads without the recovery columns; a writer migrates it and backfills them", () =>
    Effect.gen(function*() {
      const name = freshName("format1")
      const store = yield* openStore(name)
      const { call, r } = yield* sealedRun(store, "run-old", [
        { callId: "c1", mode: "reconcilable" },
        { callId: "c2", mode: "never_auto_retry" }
      ])
      // Back to format 1, as an older runtime-resume left it: no recovery columns, no partial index.
      const client = yield* rawClient
      const s = `"rr_${name}"`
      yield* Effect.promise(() =>
        client.query(
          `DROP INDEX ${s}.calls_unsettled; ALTER TABLE ${s}.calls DROP COLUMN recovery_mode, DROP COLUMN idempotency_key, ` +
            "DROP COLUMN evidence_digest, DROP COLUMN recovery_kind, DROP COLUMN recovery_disposition, DROP COLUMN recovery_reason, " +
            `DROP COLUMN recovery_actor, DROP COLUMN recovery_seq; UPDATE ${s}.meta SET value = 1 WHERE key = 'format_version'`
        )
      )
      const reader = yield* openStore(name, true)
      assert.deepStrictEqual((yield* reader.unsettledOperations(r)).map((o) => [o.call.callId, o.call.recoveryMode ?? null]), [
        ["c1", null],
        ["c2", null]
      ])
      assert.strictEqual((yield* reader.toolCallState(r, "c1")).call?.dispatchSeq, 4)
      const writer = yield* openStore(name)
      const version = yield* Effect.promise(() => client.query(`SELECT value FROM ${s}.meta WHERE key = 'format_version'`))
      assert.strictEqual(Number(version.rows[0].value), PG_FORMAT_VERSION)
      const ops = yield* writer.unsettledOperations(r)
      assert.deepStrictEqual(ops.map((o) => [o.call.callId, o.call.recoveryMode ?? null, o.call.evidenceDigest ?? null]), [
        ["c1", "reconcilable", EVIDENCE_DIGEST],
        ["c2", "never_auto_retry", null]
      ])
      // The migrated index is what the recovery writer checks: a bundle with the recorded evidence digest commits.
      yield* writer.appendRecovery(r, RecoveryBundle.reconcileParked(call("c1"), { ts: 1, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
      assert.deepStrictEqual((yield* writer.unsettledOperations(r)).map((o) => o.call.callId), ["c2"])
    }))
})
