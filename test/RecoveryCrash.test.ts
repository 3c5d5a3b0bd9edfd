// The crash and race proofs of docs/spec/05-reconciliation.md with real child processes: a SIGKILL at each kill point on SQLite and JSONL,
// then new processes run a host's start again; and two processes settling one operation at once on SQLite.
import * as Command from "@effect/platform/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Layer from "effect/Layer"
import { fileURLToPath } from "node:url"
import * as Observation from "../src/Domain/Observation.js"
import * as Tool from "../src/Domain/Tool.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import * as Resolve from "../src/Programs/Resolve.js"
import * as RecoveryFailpoints from "../src/Services/RecoveryFailpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { headerOf } from "./support/runHeaders.js"
import { HARNESS_STORES } from "../harness/Child.js"
import { HarnessRow } from "../harness/Harness.js"
import {
  decisionProblems,
  rawDifference,
  RECOVERY_CRASH_POINTS,
  RECOVERY_EXPECTED,
  type RecoveryCrashDetail,
  type RecoveryRaceDetail,
  RecoveryRow,
  runRecoveryCrashRow,
  runRecoveryRace
} from "../harness/RecoveryHarness.js"

const memory = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeOperator.layerFixed("alice"))

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))

const emptyDetail = (): RecoveryCrashDetail => ({
  decisions: [],
  reference: [],
  continuation: null,
  referenceContinuation: null,
  providerCalls: {},
  executions: [],
  t1Key: null,
  problems: []
})

// Concurrent: each row is a handful of child processes in its own folders, mostly process start-up (2 cores).
describe.concurrent("recovery crash proofs: SIGKILL at each kill point of docs/spec/05-reconciliation.md", () => {
  for (const store of HARNESS_STORES) {
    for (const point of RECOVERY_CRASH_POINTS) {
      it.live(`${store}: killed at ${point}, a new start converges on the uninterrupted run's decisions`, () =>
        Effect.gen(function*() {
          const detail = emptyDetail()
          const row = yield* runRecoveryCrashRow(store, point, detail)
          assert.isTrue(row.pass, row.error?.message)
          assert.strictEqual(row.markerWritten, false)
          assert.strictEqual(row.deterministic, true)
          assert.strictEqual(row.ledgerUnchanged, true)
          const expected = RECOVERY_EXPECTED[point]
          // The literal expectation, and the uninterrupted recovery of the same crashed state.
          assert.deepStrictEqual(detail.decisions.map((d) => [d.disposition, d.reasonCode, d.kind]), expected.decisions.map((d) => [...d]))
          assert.deepStrictEqual(detail.decisions, detail.reference)
          assert.strictEqual(detail.continuation, expected.continuation)
          assert.strictEqual(detail.referenceContinuation, expected.continuation)
          // The provider: once per boundary when the turn continued, never after a park.
          assert.deepStrictEqual(Object.values(detail.providerCalls), expected.providerCalls === 0 ? [] : [1])
          // The idempotent tool: twice (killed after the first re-run), both with T1's key; never in a file write.
          if (expected.executions !== undefined) {
            assert.strictEqual(detail.executions.length, 2)
            assert.isNotNull(detail.t1Key)
            assert.deepStrictEqual(detail.executions, [detail.t1Key, detail.t1Key])
          } else assert.deepStrictEqual(detail.executions, [])
        }).pipe(Effect.provide(NodeContext.layer)), 240_000)
    }
  }
})

describe("recovery race: two processes settle one operation at once (SQLite, no owner lock)", () => {
  it.live("reconcile against reconcile, 20 rounds: exactly one bundle each round; the other finds it recorded", () =>
    Effect.gen(function*() {
      const detail: RecoveryRaceDetail = { rounds: 0, admitted: 0, winners: {}, losers: {}, elapsedMs: 0 }
      const row = yield* runRecoveryRace("race_reconcile", { rounds: 20 }, detail)
      yield* Effect.logInfo(`race_reconcile: ${detail.rounds} rounds in ${detail.elapsedMs} ms, winners ${JSON.stringify(detail.winners)}, losers ${JSON.stringify(detail.losers)}`)
      assert.isTrue(row.pass, row.error?.message)
      assert.strictEqual(detail.admitted, 20)
      assert.deepStrictEqual(detail.winners, { reconcile_matches_expected_state: 20 })
      // Both had built their bundle before either wrote (the barrier): the second write met the first in the store and,
      // the bundles being canonically equal (ts aside), the second reconciler counted it as done, as 05 says.
      assert.deepStrictEqual(detail.losers, {})
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)

  it.live("reconcile against resolve, 20 rounds: exactly one decision each round, each side wins 10; the loser names the decision", () =>
    Effect.gen(function*() {
      const detail: RecoveryRaceDetail = { rounds: 0, admitted: 0, winners: {}, losers: {}, elapsedMs: 0 }
      const row = yield* runRecoveryRace("race_resolve", { rounds: 20 }, detail)
      yield* Effect.logInfo(`race_resolve: ${detail.rounds} rounds in ${detail.elapsedMs} ms, winners ${JSON.stringify(detail.winners)}, losers ${JSON.stringify(detail.losers)}`)
      assert.isTrue(row.pass, row.error?.message)
      assert.strictEqual(detail.admitted, 20)
      // Odd rounds: the person writes between the reconciler's observation and its write, whose append is refused
      // inside the store (already_decided, naming manual_edit). Even rounds: the reconciler writes first, and resolve is
      // refused already_settled, naming its decision.
      assert.deepStrictEqual(detail.winners, { manual_edit: 10, reconcile_matches_expected_state: 10 })
      assert.deepStrictEqual(detail.losers, { reconcile_already_decided: 10, resolve_already_settled: 10 })
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)
})

describe("RecoveryFailpoints: where reconcile and resolve hit docs/spec/05-reconciliation.md's kill points", () => {
  it.effect("re-execution then its bundle, observation then its bundle; nothing for a call left to a person; a manual bundle; nothing for a refusal", () =>
    Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const b = EventBuilder.make("fp-run", 1000)
      yield* headers.create(headerOf(b))
      yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
      for (const [callId, name, mode] of [["c1", "Idem", "idempotent"], ["c2", "Obs", "reconcilable"], ["c3", "Never", "never_auto_retry"]] as const) {
        const args = { n: callId }
        yield* store.appendDispatch(b.runId, {
          call: b.call(callId, name, args),
          dispatch: b.dispatched(callId, name, args, mode, mode === "reconcilable" ? { evidence: { seen: true } } : undefined)
        })
      }
      yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
      const args = Schema.Struct({ n: Schema.String })
      const tools = [
        Tool.make({ name: "Idem", args, recoveryMode: "idempotent", implementation: () => Effect.succeed({ ok: true }) }),
        Tool.make({
          name: "Obs",
          args,
          recoveryMode: "reconcilable",
          evidence: () => Effect.succeed({ seen: true }),
          observe: () => Effect.succeed(Observation.matchesExpectedState({ ok: true }, "seen")),
          implementation: () => Effect.succeed({ ok: true })
        })
      ]
      const log: Array<RecoveryFailpoints.RecoveryPoint> = []
      const recording = RecoveryFailpoints.layerRecording(log)
      const report = yield* Reconcile.reconcile({ tools, confirmed: true }).pipe(Effect.provide(recording))
      assert.deepStrictEqual(report.operations.map((o) => [o.callId, o.outcome]), [["c1", "completed"], ["c2", "completed"], ["c3", "left"]])
      assert.deepStrictEqual(log, ["reexecuted", "bundle_committed", "observed", "bundle_committed"])
      log.length = 0
      yield* Resolve.resolve({ runId: "fp-run", callId: "c3", choice: { _tag: "abort" } }).pipe(Effect.provide(recording))
      assert.deepStrictEqual(log, ["manual_bundle_committed"])
      log.length = 0
      const refused = yield* Effect.either(Resolve.resolve({ runId: "fp-run", callId: "c1", choice: { _tag: "abort" } }).pipe(Effect.provide(recording)))
      assert.isTrue(refused._tag === "Left")
      assert.deepStrictEqual(log, [])
    }).pipe(Effect.provide(memory)))
})

describe("recovery proofs: the checks can fail", () => {
  it.effect("05's decision rules: a second reconciler, a second manual, anything after a manual or completed one", () =>
    Effect.sync(() => {
      const park = { disposition: "parked", kind: "reconciler", reasonCode: "reconcile_matches_prior_state" }
      const done = { disposition: "completed", kind: "reconciler", reasonCode: "reconcile_matches_expected_state" }
      const edit = { disposition: "completed", kind: "manual", reasonCode: "manual_edit" }
      const abort = { disposition: "parked", kind: "manual", reasonCode: "manual_abandon" }
      assert.deepStrictEqual(decisionProblems([park, edit]), [])
      assert.deepStrictEqual(decisionProblems([edit]), [])
      assert.deepStrictEqual(decisionProblems([done]), [])
      assert.deepStrictEqual(decisionProblems([park, park]), ["2 reconciler decisions on one operation"])
      assert.include(decisionProblems([abort, edit]).join(";"), "2 manual decisions")
      assert.include(decisionProblems([done, edit]).join(";"), "follows a manual or completed decision")
      assert.include(decisionProblems([edit, park]).join(";"), "follows a manual or completed decision")
    }))

  it.effect("a changed earlier row is a difference; rows added after it are not", () =>
    Effect.sync(() => {
      assert.isUndefined(rawDifference({ rows: ["a", "b"], bytes: "" }, { rows: ["a", "b", "c"], bytes: "" }))
      assert.include(rawDifference({ rows: ["a", "b"], bytes: "" }, { rows: ["a", "B", "c"], bytes: "" }) ?? "", "changed or vanished")
      assert.isUndefined(rawDifference({ rows: [], bytes: "abc" }, { rows: [], bytes: "abcdef" }))
      assert.include(rawDifference({ rows: [], bytes: "abc" }, { rows: [], bytes: "abXdef" }) ?? "", "first 3 bytes")
    }))
})

describe("recovery rows in `runtime-resume harness`", () => {
  it.live("`runtime-resume harness --failpoint R/before_rename --store sqlite --json` prints the R/ row, passing, exit 0", () =>
    Effect.gen(function*() {
      const proc = yield* Command.make(BIN, "harness", "--failpoint", "R/before_rename", "--store", "sqlite", "--json").pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
      const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: 3 })
      assert.strictEqual(Number(code), 0, stderr)
      // The harness's row schema (docs/spec/06-cli.md JSON), and the recovery row's own.
      const { rows } = Schema.decodeUnknownSync(Schema.Struct({ rows: Schema.Array(HarnessRow) }))(JSON.parse(stdout))
      assert.deepStrictEqual(Schema.decodeUnknownSync(Schema.Array(RecoveryRow))(rows), rows)
      assert.deepStrictEqual(rows.map((r) => [r.failpoint, r.store, r.committedPrefix, r.decision, r.expected, r.pass]), [
        ["R/before_rename", "sqlite", "t1_dispatched", "reconcile_matches_prior_state", "reconcile_matches_prior_state", true]
      ])
      assert.include(stderr, "1 recovery")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
