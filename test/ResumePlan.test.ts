// The Phase 0 ResumePlan: the four committed prefixes of docs/spec/02-resume-plan.md, determinism, offsets, and every corruption reason.
// Plans are computed from hand-built committed rows with the normative chain, so each case can fail.
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Equal, FastCheck, Schema, Stream } from "effect"
import * as Digest from "../src/Domain/Digest.js"
import { ResumePlan, VERIFICATION_DIRECTIVE } from "../src/Domain/ResumePlan.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, CommittedRow, RecoveryDecided, RecoveryProvenance } from "../src/Domain/RuntimeEvent.js"
import { CallId, deriveOperationId } from "../src/Domain/Ids.js"
import { decide, exitCode } from "../src/Domain/Rules/Decide.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as HarnessLedger from "../src/Testing/HarnessLedger.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as ResumePlanner from "../src/Domain/Rules/ResumePlanner.js"

/** Commits events as a store would: dense seqs and the normative chain (no validation). */
const commit = (runId: string, events: ReadonlyArray<RuntimeEvent>): Array<CommittedRow> => {
  let d = Digest.genesis(runId)
  return events.map((event, i) => {
    d = Digest.next(d, i + 1, Either.getOrThrow(canonicalText(event)))
    return new CommittedRow({ seq: i + 1, end: i + 1, digest: d, event })
  })
}

const plan = (rows: ReadonlyArray<CommittedRow>, options?: ResumePlanner.PlanOptions) =>
  Effect.runSync(Effect.either(planResume(rows, options)))

const failure = (rows: ReadonlyArray<CommittedRow>) => {
  const r = plan(rows)
  assert.isTrue(Either.isLeft(r), "expected the plan to fail")
  return (r as Either.Left<any, ResumePlan>).left
}

describe("planResume: a dispatch long after its call", () => {
  it.effect("a matching args hash is accepted however far the dispatch is from its call", () =>
    Effect.gen(function*() {
      const x = EventBuilder.make("r")
      const args = { command: "ls", deep: [{ a: [1, 2, { b: null }] }], s: "é\n\"" }
      const p = yield* planResume(commit("r", [
        x.opened("t1_after_preflight_v1"),
        x.call("c", "Bash", args),
        ...Array.from({ length: 50 }, (_, i) => x.model(`m${i}`)),
        x.call("d", "Read", { path: "/p" }),
        x.response("d", "Read", "ok"),
        x.dispatched("c", "Bash", args)
      ]))
      assert.deepStrictEqual(p.operations.map((o): Array<unknown> => [o.callId, o.status, o.dispatchSeq]), [["c", "indeterminate", 55], ["d", "succeeded", undefined]])
    }))
})

describe("planResume: what the replay leaves out", () => {
  it.effect("a hidden response drops its visible call; a hidden call drops its visible response; a dangling call is dropped; the rest stays", () =>
    Effect.gen(function*() {
      const x = EventBuilder.make("r")
      const p = yield* planResume(commit("r", [
        x.opened(), // 1
        x.user("u"), // 2
        x.call("a", "Bash", {}), // 3: answered by a hidden response → dropped
        x.response("a", "Bash", 1, { hidden: true }), // 4: hidden
        x.call("b", "Bash", {}, { hidden: true }), // 5: hidden
        x.response("b", "Bash", 2), // 6: its call is hidden → dropped
        x.call("c", "Bash", {}), // 7: never answered → dropped
        x.call("d", "Read", {}), // 8
        x.response("d", "Read", 3), // 9
        x.model("after") // 10
      ]))
      assert.deepStrictEqual(p.replay.map((r) => r.seq), [2, 8, 9, 10])
      assert.deepStrictEqual(p.operations.map((o) => o.callId), ["a", "b", "c", "d"])
      assert.strictEqual(p.decision, "blocked")
    }))
})

describe("planResume over the four committed prefixes (docs/spec/02-resume-plan.md)", () => {
  const runId = "run-h"
  const rowsFor = (prefix: keyof typeof HarnessLedger.PREFIX_LENGTH) => commit(runId, HarnessLedger.prefixEvents(prefix, runId))

  it.effect("before_function_call: safe_replay, no operations", () =>
    Effect.gen(function*() {
      const p = yield* planResume(rowsFor("before_function_call"))
      assert.strictEqual(p.decision, "safe_replay")
      assert.strictEqual(p.operations.length, 0)
      assert.deepStrictEqual([...p.reasons], [])
      assert.deepStrictEqual(p.replay.map((r) => r.id), ["run-h:2"])
      assert.strictEqual(p.requiresVerification, false)
      assert.isUndefined(p.directive)
      assert.isUndefined(p.terminal)
    }))

  it.effect("after_function_call: blocked, one indeterminate op, dangling_tool_state, call absent from replay", () =>
    Effect.gen(function*() {
      const p = yield* planResume(rowsFor("after_function_call"))
      assert.strictEqual(p.decision, "blocked")
      assert.deepStrictEqual(p.operations.map((o) => [o.callId, o.status, o.callSeq]), [["tool-1", "indeterminate", 3]])
      assert.deepStrictEqual([...p.reasons], ["dangling_tool_state"])
      assert.deepStrictEqual(p.replay.map((r) => r.id), ["run-h:2"])
      assert.strictEqual(p.requiresVerification, true)
      assert.strictEqual(p.directive, VERIFICATION_DIRECTIVE)
      assert.strictEqual(decide(p), "blocked")
    }))

  it.effect("after_function_response: safe_replay, op succeeded, call and response paired in replay", () =>
    Effect.gen(function*() {
      const p = yield* planResume(rowsFor("after_function_response"))
      assert.strictEqual(p.decision, "safe_replay")
      assert.deepStrictEqual(p.operations.map((o) => [o.status, o.responseSeq]), [["succeeded", 4]])
      assert.deepStrictEqual(p.replay.map((r) => [r.seq, r.id]), [[2, "run-h:2"], [3, "run-h:3"], [4, "run-h:4"]])
    }))

  it.effect("after_terminal_event: the same tool decision, and the terminal fact", () =>
    Effect.gen(function*() {
      const before = yield* planResume(rowsFor("after_function_response"))
      const p = yield* planResume(rowsFor("after_terminal_event"))
      assert.strictEqual(p.decision, before.decision)
      assert.isTrue(Equal.equals(p.operations, before.operations))
      assert.isTrue(Equal.equals(p.replay, before.replay))
      assert.strictEqual(p.terminal?.status, "failed")
      assert.strictEqual(p.terminal?.seq, 5)
      assert.strictEqual(p.highWater.seq, 5)
      assert.strictEqual(decide(p), "safe_replay")
    }))
})

describe("planResume semantics", () => {
  it.effect("twice on equal input gives Equal plans (also across Stream and Iterable, and after encode/decode)", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const rows = commit("r", [b.opened(), b.user("u"), b.call("a", "Bash", { x: [1, 2] }), b.response("a", "Bash", 1), b.call("b", "Read", {})])
      const p1 = yield* planResume(rows)
      const p2 = yield* planResume(commit("r", rows.map((r) => r.event)))
      const p3 = yield* planResume(Stream.fromIterable(rows).pipe(Stream.rechunk(2)))
      assert.isTrue(Equal.equals(p1, p2))
      assert.isTrue(Equal.equals(p1, p3))
      const json = Schema.encodeSync(ResumePlan)(p1)
      assert.isTrue(Equal.equals(p1, Schema.decodeUnknownSync(ResumePlan)(json)))
      assert.deepStrictEqual(json, Schema.encodeSync(ResumePlan)(p3))
      assert.isFalse(Equal.equals(p1, yield* planResume(rows.slice(0, 4))))
    }))

  it.effect("expectedHighWater different from the prefix is always RuntimeOffsetMismatch", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const rows = commit("r", [b.opened(), b.user("u")])
      const ok = yield* planResume(rows, { expectedHighWater: { seq: 2, digest: rows[1]!.digest } })
      assert.strictEqual(ok.highWater.digest, rows[1]!.digest)
      for (const expected of [{ seq: 1 }, { seq: 3 }, { seq: 2, digest: rows[0]!.digest }]) {
        const e = yield* Effect.flip(planResume(rows, { expectedHighWater: expected }))
        assert.strictEqual(e._tag, "RuntimeOffsetMismatch")
        assert.strictEqual(decide(e), "indeterminate")
        assert.strictEqual(exitCode(decide(e)), 2)
      }
    }))

  it.effect("a failed response is a settled operation; the T1 protocol makes a bare call not_dispatched", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const p = yield* planResume(commit("r", [b.opened("t1_after_preflight_v1"), b.user("u"), b.call("a", "Bash", {}), b.response("a", "Bash", "boom", { isError: true }), b.call("b", "Bash", {})]))
      assert.deepStrictEqual(p.operations.map((o) => o.status), ["failed", "not_dispatched"])
      assert.strictEqual(p.decision, "blocked")
      assert.strictEqual(p.requiresVerification, false)
      const legacy = EventBuilder.make("l")
      const q = yield* planResume(commit("l", [legacy.opened("none"), legacy.call("b", "Bash", {})]))
      assert.deepStrictEqual(q.operations.map((o) => o.status), ["indeterminate"])
    }))

  it.effect("a dispatched call without a response is indeterminate even under T1", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const p = yield* planResume(commit("r", [b.opened("t1_after_preflight_v1"), b.call("a", "Bash", { q: 1 }), b.dispatched("a", "Bash", { q: 1 })]))
      assert.deepStrictEqual(p.operations.map((o) => [o.status, o.dispatchSeq, o.operationId?.startsWith("op_")]), [["indeterminate", 3, true]])
      assert.strictEqual(p.requiresVerification, true)
    }))

  it.effect("replay leaves out hidden events, unanswered calls, responses of hidden calls, and control facts", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const events = [
        b.opened(), // 1
        b.user("u"), // 2
        b.call("h", "Bash", {}, { hidden: true }), // 3
        b.response("h", "Bash", 1), // 4: its call is hidden
        b.call("x", "Bash", {}), // 5: never answered
        b.model("m"), // 6
        b.call("v", "Read", {}), // 7
        b.diagnostic("d"), // 8
        b.response("v", "Read", 2), // 9
        b.custom(b.user("secret").body, { hidden: true }), // 10
        b.terminated("completed") // 11
      ]
      const p = yield* planResume(commit("r", events))
      assert.deepStrictEqual(p.replay.map((r) => r.seq), [2, 6, 7, 9])
      assert.deepStrictEqual(p.operations.map((o) => [o.callId, o.status]), [["h", "succeeded"], ["x", "indeterminate"], ["v", "succeeded"]])
      assert.strictEqual(decide(p), "blocked")
    }))

  it.effect("completed only when the terminal says completed and nothing is unsettled", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const p = yield* planResume(commit("r", [b.opened(), b.user("u"), b.terminated("completed")]))
      assert.strictEqual(decide(p), "completed")
      assert.strictEqual(exitCode(decide(p)), 0)
      const c = EventBuilder.make("c")
      const q = yield* planResume(commit("c", [c.opened(), c.call("a", "Bash", {}), c.terminated("completed")]))
      assert.strictEqual(decide(q), "blocked")
      assert.strictEqual(exitCode(decide(q)), 1)
    }))

  it.effect("an empty prefix with a runId plans safe_replay at high-water { 0, d(0) }", () =>
    Effect.gen(function*() {
      const p = yield* planResume([], { runId: "empty" })
      assert.strictEqual(p.decision, "safe_replay")
      assert.deepStrictEqual([p.highWater.seq, p.highWater.digest], [0, Digest.genesis("empty")])
    }))

  it.effect("the planner is an incremental fold: page by page gives the same plan", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const rows = commit("r", [b.opened(), b.user("u"), b.call("a", "Bash", {}), b.response("a", "Bash", 1)])
      let state = ResumePlanner.initial()
      for (const row of rows) state = ResumePlanner.step(state, row)
      const p = Either.getOrThrow(ResumePlanner.finish(state))
      assert.isTrue(Equal.equals(p, yield* planResume(rows)))
    }))
})

describe("planResume refuses corrupt prefixes with LedgerCorruption naming run, seq and reason", () => {
  const b = () => EventBuilder.make("r")
  const base = (x = b()) => [x.opened("t1_after_preflight_v1"), x.user("u"), x.call("c", "Bash", { a: 1 }), x.response("c", "Bash", "ok")]

  const cases: Array<[string, () => Array<CommittedRow>, string, number]> = [
    ["seq gap", () => commit("r", base()).filter((r) => r.seq !== 2), "seq_gap", 3],
    ["seq not from 1", () => commit("r", base()).slice(1), "seq_gap", 2],
    [
      "flipped digest",
      () => commit("r", base()).map((r) => r.seq === 3 ? new CommittedRow({ ...r, digest: Digest.ofText("x") }) : r),
      "digest_mismatch",
      3
    ],
    ["event of another run", () => {
      const x = b()
      const o = EventBuilder.make("other")
      const events = [x.opened(), o.user("u")]
      return commit("r", events)
    }, "identity_mismatch", 2],
    ["other turn", () => {
      const x = b()
      return commit("r", [x.opened(), EventBuilder.make({ ...x.ids, turnId: "t2" }).user("u")])
    }, "identity_mismatch", 2],
    ["opener missing", () => {
      const x = b()
      return commit("r", [x.user("u")])
    }, "opener_invalid", 1],
    ["second opener", () => {
      const x = b()
      return commit("r", [x.opened(), x.opened()])
    }, "opener_invalid", 2],
    ["duplicate event id", () => {
      const x = b()
      return commit("r", [x.opened(), x.custom(x.user("a").body, { id: "dup" }), x.custom(x.user("b").body, { id: "dup" })])
    }, "duplicate_event_id", 3],
    ["duplicate call", () => {
      const x = b()
      return commit("r", [x.opened(), x.call("c", "Bash", {}), x.call("c", "Bash", {})])
    }, "duplicate_call", 3],
    ["orphan response", () => {
      const x = b()
      return commit("r", [x.opened(), x.response("c", "Bash", 1)])
    }, "orphan_response", 2],
    ["response before its call", () => {
      const x = b()
      return commit("r", [x.opened(), x.response("c", "Bash", 1), x.call("c", "Bash", {})])
    }, "orphan_response", 2],
    ["two responses", () => {
      const x = b()
      return commit("r", [...base(x), x.response("c", "Bash", "again")])
    }, "duplicate_response", 5],
    ["name mismatch", () => {
      const x = b()
      return commit("r", [x.opened(), x.call("c", "Bash", {}), x.response("c", "Read", 1)])
    }, "name_mismatch", 3],
    ["append after terminal", () => {
      const x = b()
      return commit("r", [x.opened(), x.terminated("failed"), x.user("late")])
    }, "event_after_terminal", 3],
    ["second terminal", () => {
      const x = b()
      return commit("r", [x.opened(), x.terminated("failed"), x.terminated("completed")])
    }, "event_after_terminal", 3],
    ["orphan dispatch", () => {
      const x = b()
      return commit("r", [x.opened("t1_after_preflight_v1"), x.dispatched("c", "Bash", {})])
    }, "orphan_dispatch", 2],
    ["duplicate dispatch", () => {
      const x = b()
      return commit("r", [x.opened("t1_after_preflight_v1"), x.call("c", "Bash", {}), x.dispatched("c", "Bash", {}), x.dispatched("c", "Bash", {})])
    }, "duplicate_dispatch", 4],
    ["args hash mismatch", () => {
      const x = b()
      return commit("r", [x.opened("t1_after_preflight_v1"), x.call("c", "Bash", { a: 1 }), x.dispatched("c", "Bash", { a: 2 })])
    }, "args_hash_mismatch", 3],
    ["args hash mismatch, the dispatch long after its call (the hash is computed when the dispatch arrives)", () => {
      const x = b()
      return commit("r", [
        x.opened("t1_after_preflight_v1"),
        x.call("c", "Bash", { a: [1, { b: "x" }] }),
        x.call("d", "Read", { path: "/p" }),
        x.response("d", "Read", "ok"),
        x.model("thinking"),
        x.dispatched("c", "Bash", { a: [1, { b: "y" }] })
      ])
    }, "args_hash_mismatch", 6],
    ["args hash mismatch: the dispatch names another call's args", () => {
      const x = b()
      return commit("r", [
        x.opened("t1_after_preflight_v1"),
        x.call("c", "Bash", { a: 1 }),
        x.call("d", "Bash", { a: 2 }),
        x.dispatched("d", "Bash", { a: 2 }),
        x.dispatched("c", "Bash", { a: 2 })
      ])
    }, "args_hash_mismatch", 5],
    ["dispatch after response", () => {
      const x = b()
      return commit("r", [...base(x), x.dispatched("c", "Bash", { a: 1 })])
    }, "dispatch_order", 5],
    ["operation id tamper", () => {
      const x = b()
      const other = EventBuilder.make({ ...x.ids, invocationId: "inv-other" })
      const d = other.dispatched("c", "Bash", {})
      return commit("r", [x.opened("t1_after_preflight_v1"), x.call("c", "Bash", {}), x.custom(d.body)])
    }, "identity_mismatch", 3],
    ["recovery fact (Phase 3 not landed)", () => {
      const x = b()
      return commit("r", [
        ...base(x),
        x.custom(
          new RecoveryDecided({
            operationId: deriveOperationId("inv-r", "c"),
            callId: CallId.make("c"),
            disposition: "parked",
            reasonCode: "manual_review",
            evidenceEventIds: [],
            provenance: new RecoveryProvenance({ kind: "manual", actor: "me" })
          })
        )
      ])
    }, "recovery_fact_invalid", 5]
  ]

  for (const [label, rows, reason, seq] of cases) {
    it(`${label} → ${reason} at seq ${seq}`, () => {
      const e = failure(rows())
      assert.strictEqual(e._tag, "LedgerCorruption")
      assert.strictEqual(e.reason, reason)
      assert.strictEqual(e.seq, seq)
      assert.strictEqual(e.runId, "r")
      assert.include(e.message, `seq ${seq}`)
      assert.include(e.message, reason)
      assert.strictEqual(decide(e), "corruption")
      assert.strictEqual(exitCode(decide(e)), 2)
    })
  }
})


describe("planResume properties (FastCheck)", () => {
  const arbEvents = FastCheck.array(
    FastCheck.oneof(
      FastCheck.record({ k: FastCheck.constant("user" as const), text: FastCheck.string() }),
      FastCheck.record({ k: FastCheck.constant("call" as const), id: FastCheck.integer({ min: 0, max: 5 }) }),
      FastCheck.record({ k: FastCheck.constant("resp" as const), id: FastCheck.integer({ min: 0, max: 5 }), err: FastCheck.boolean() }),
      FastCheck.record({ k: FastCheck.constant("model" as const), text: FastCheck.string() })
    ),
    { maxLength: 30 }
  )

  /** Builds only valid ledgers: a response only for an open call, each call once. */
  const build = (spec: ReadonlyArray<any>) => {
    const b = EventBuilder.make("p")
    const events: Array<RuntimeEvent> = [b.opened()]
    const called = new Set<number>()
    const answered = new Set<number>()
    for (const s of spec) {
      if (s.k === "user") events.push(b.user(s.text))
      else if (s.k === "model") events.push(b.model(s.text))
      else if (s.k === "call" && !called.has(s.id)) {
        called.add(s.id)
        events.push(b.call(`c${s.id}`, "T", { id: s.id }))
      } else if (s.k === "resp" && called.has(s.id) && !answered.has(s.id)) {
        answered.add(s.id)
        events.push(b.response(`c${s.id}`, "T", s.id, { isError: s.err }))
      }
    }
    return { rows: commit("p", events), called, answered }
  }

  it("is deterministic, never replays an unanswered call, and blocks exactly when a call is unanswered", () => {
    FastCheck.assert(
      FastCheck.property(arbEvents, (spec) => {
        const { rows, called, answered } = build(spec)
        const p1 = Either.getOrThrow(ResumePlanner.planIterable(rows))
        const p2 = Either.getOrThrow(ResumePlanner.planIterable(rows))
        if (!Equal.equals(p1, p2)) return false
        const replayed = new Set(p1.replay.map((r) => r.seq))
        for (const op of p1.operations) {
          if (op.responseSeq === undefined && replayed.has(op.callSeq)) return false
        }
        const unanswered = [...called].some((c) => !answered.has(c))
        return (p1.decision === "blocked") === unanswered && p1.operations.length === called.size
      }),
      { numRuns: 300 }
    )
  })

  it("truncating a valid ledger anywhere still plans; flipping any digest is digest_mismatch at that seq", () => {
    FastCheck.assert(
      FastCheck.property(arbEvents, FastCheck.nat(), (spec, k) => {
        const { rows } = build(spec)
        const cut = rows.slice(0, 1 + (k % rows.length))
        if (Either.isLeft(ResumePlanner.planIterable(cut))) return false
        const at = k % rows.length
        const tampered = rows.map((r, i) => i === at ? new CommittedRow({ ...r, digest: Digest.ofText(`t${k}`) }) : r)
        const e = ResumePlanner.planIterable(tampered)
        return Either.isLeft(e) && e.left._tag === "LedgerCorruption" && e.left.reason === "digest_mismatch" && e.left.seq === at + 1
      }),
      { numRuns: 300 }
    )
  })

  it.effect("a Stream of pages plans Equal to the iterable, whatever the page size", () =>
    Effect.gen(function*() {
      const samples = FastCheck.sample(FastCheck.tuple(arbEvents, FastCheck.integer({ min: 1, max: 7 })), 50)
      for (const [spec, size] of samples) {
        const { rows } = build(spec)
        const a = yield* planResume(rows)
        const s = yield* planResume(Stream.fromChunks(...chunksOf(rows, size)))
        assert.isTrue(Equal.equals(a, s))
      }
    }))
})

const chunksOf = <A>(xs: ReadonlyArray<A>, n: number) =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => Chunk.fromIterable(xs.slice(i * n, i * n + n)))
