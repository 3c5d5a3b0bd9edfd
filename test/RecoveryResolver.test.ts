// The RecoveryResolver of docs/spec/03-tool-boundary.md: its decision table row by row, its agreement with planResume, and FastCheck
// properties over generated tool ledgers, including ten fault injections that must always be reported at their seq.
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Equal, FastCheck, Schema, Stream } from "effect"
import type { LedgerCorruption } from "../src/Domain/Errors.js"
import { CallId, deriveOperationId } from "../src/Domain/Ids.js"
import type { OperationId } from "../src/Domain/Ids.js"
import { OperationDecision, ParkReason, ResolvedRun } from "../src/Domain/RecoveryDecision.js"
import type { CommittedRow, ToolBoundary } from "../src/Domain/RuntimeEvent.js"
import {
  FunctionResponse,
  ReconcileObserved,
  RecoveryDecided,
  RecoveryProvenance,
  RuntimeEvent,
  ToolDispatched
} from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as ResumePlanner from "../src/Domain/Rules/ResumePlanner.js"
import type { CallFacts, Need, ToolLedger } from "./support/toolLedgers.js"
import { arbToolLedger, commit, insertAt, positionIn, replaceAt, withId } from "./support/toolLedgers.js"

const T1: ToolBoundary = "t1_after_preflight_v1"

const resolveOk = (rows: ReadonlyArray<CommittedRow>) => Either.getOrThrow(RecoveryResolver.resolve(rows))

const resolveErr = (rows: ReadonlyArray<CommittedRow>) => {
  const r = RecoveryResolver.resolve(rows)
  assert.isTrue(Either.isLeft(r), "expected the resolution to fail")
  return (r as Either.Left<LedgerCorruption, ResolvedRun>).left
}

/** [callId, decision, reason, origin] of each decision, for compact comparisons. */
const summary = (run: ResolvedRun): Array<ReadonlyArray<string | undefined>> =>
  run.operations.map((d) => [d.callId, d.decision, d.reason, d.origin])

describe("RecoveryResolver: the decision table of docs/spec/03-tool-boundary.md, row by row", () => {
  it("call + dispatch + T2 response → completed, matching_response, origin normal_t2", () => {
    const b = EventBuilder.make("r")
    const run = resolveOk(commit("r", [
      b.opened(T1), b.call("a", "Write", { p: 1 }), b.dispatched("a", "Write", { p: 1 }),
      b.response("a", "Write", "ok", { operationBound: true })
    ]))
    assert.deepStrictEqual(summary(run), [["a", "completed", "matching_response", "normal_t2"]])
    const d = run.operations[0]!
    assert.deepStrictEqual([d.callSeq, d.dispatchSeq, d.responseSeq, d.isError], [2, 3, 4, false])
    assert.strictEqual(d.operationId, deriveOperationId("inv-r", "a"))
    assert.strictEqual(run.toolBoundary, T1)
  })

  it("call + response without a dispatch → completed, origin pre_t1_synthetic (a T1 preflight refusal, or legacy)", () => {
    const b = EventBuilder.make("r")
    const run = resolveOk(commit("r", [
      b.opened(T1), b.call("a", "Write", {}), b.response("a", "Write", "refused", { isError: true })
    ]))
    assert.deepStrictEqual(summary(run), [["a", "completed", "matching_response", "pre_t1_synthetic"]])
    assert.strictEqual(run.operations[0]!.isError, true)
    assert.isUndefined(run.operations[0]!.operationId)
    const l = EventBuilder.make("l")
    const legacy = resolveOk(commit("l", [l.opened("none"), l.call("a", "Read", {}), l.response("a", "Read", 1)]))
    assert.deepStrictEqual(summary(legacy), [["a", "completed", "matching_response", "pre_t1_synthetic"]])
    assert.strictEqual(legacy.operations[0]!.isError, false)
  })

  it("call + dispatch, no response → indeterminate, dispatch_without_response", () => {
    const b = EventBuilder.make("r")
    const run = resolveOk(commit("r", [b.opened(T1), b.call("a", "Bash", {}), b.dispatched("a", "Bash", {})]))
    assert.deepStrictEqual(summary(run), [["a", "indeterminate", "dispatch_without_response", undefined]])
    assert.strictEqual(run.operations[0]!.dispatchSeq, 3)
  })

  it("call only → definitely_not_dispatched under T1, indeterminate (legacy_dispatch_unknown) under none", () => {
    const b = EventBuilder.make("r")
    assert.deepStrictEqual(summary(resolveOk(commit("r", [b.opened(T1), b.call("a", "Bash", {})]))), [
      ["a", "definitely_not_dispatched", "new_protocol_before_dispatch", undefined]
    ])
    const l = EventBuilder.make("l")
    assert.deepStrictEqual(summary(resolveOk(commit("l", [l.opened("none"), l.call("a", "Bash", {})]))), [
      ["a", "indeterminate", "legacy_dispatch_unknown", undefined]
    ])
  })

  it("hidden calls are operations like any other; a terminal keeps the decisions and is reported", () => {
    const b = EventBuilder.make("r")
    const rows = commit("r", [
      b.opened(T1), b.call("h", "Bash", {}, { hidden: true }), b.call("v", "Read", {}), b.response("v", "Read", 1, { isError: true }),
      b.terminated("failed", "boom")
    ])
    const run = resolveOk(rows)
    assert.deepStrictEqual(summary(run), [
      ["h", "definitely_not_dispatched", "new_protocol_before_dispatch", undefined],
      ["v", "completed", "matching_response", "pre_t1_synthetic"]
    ])
    assert.deepStrictEqual([run.terminal?.status, run.terminal?.seq, run.terminal?.failureClass], ["failed", 5, "boom"])
    assert.deepStrictEqual([run.highWater.seq, run.highWater.digest], [5, rows[4]!.digest])
  })

  it("recovery facts are recovery_fact_invalid until Phase 3 (the bundle rows are unreachable)", () => {
    const b = EventBuilder.make("r")
    const op = deriveOperationId("inv-r", "a")
    const base = [b.opened(T1), b.call("a", "Bash", {}), b.dispatched("a", "Bash", {})]
    const observed = b.custom(new ReconcileObserved({ operationId: op, callId: CallId.make("a"), observation: "matches_expected_state", evidenceDigest: "sha256:" + "0".repeat(64) }))
    const decided = b.custom(
      new RecoveryDecided({
        operationId: op,
        callId: CallId.make("a"),
        disposition: "parked",
        reasonCode: "reconcile_diverged",
        evidenceEventIds: [],
        provenance: new RecoveryProvenance({ kind: "reconciler", actor: "file" })
      })
    )
    for (const fact of [observed, decided]) {
      const e = resolveErr(commit("r", [...base, fact]))
      assert.deepStrictEqual([e.reason, e.seq, e.eventId], ["recovery_fact_invalid", 4, fact.id])
      const sealed = resolveErr(commit("r", [...base, b.terminated("failed"), fact]))
      assert.deepStrictEqual([sealed.reason, sealed.seq], ["recovery_fact_invalid", 5])
    }
  })

  it("toolOperationStatus maps every decision kind, parked included", () => {
    const make = (decision: OperationDecision["decision"], isError?: boolean) =>
      RecoveryResolver.toolOperationStatus(
        OperationDecision.make({
          callId: CallId.make("a"),
          name: "n",
          decision,
          reason: decision === "parked" ? ParkReason.make("manual_abandon") : "matching_response",
          callSeq: 2,
          ...(isError !== undefined ? { isError } : {})
        })
      )
    assert.deepStrictEqual(
      [make("completed", false), make("completed", true), make("indeterminate"), make("definitely_not_dispatched"), make("parked")],
      ["succeeded", "failed", "indeterminate", "not_dispatched", "parked"]
    )
  })

  it("an empty run resolves with no boundary and no operations; an offset mismatch is RuntimeOffsetMismatch", () => {
    const empty = Either.getOrThrow(RecoveryResolver.resolve([], { runId: "e" }))
    assert.deepStrictEqual([empty.runId, empty.highWater.seq, empty.toolBoundary, empty.operations.length], ["e", 0, undefined, 0])
    const b = EventBuilder.make("r")
    const rows = commit("r", [b.opened(), b.call("a", "Bash", {})])
    const e = RecoveryResolver.resolve(rows, { expectedHighWater: { seq: 1 } })
    assert.isTrue(Either.isLeft(e) && e.left._tag === "RuntimeOffsetMismatch")
    assert.isTrue(Either.isRight(RecoveryResolver.resolve(rows, { expectedHighWater: { seq: 2, digest: rows[1]!.digest } })))
  })

  it.effect("resolveStream and the incremental fold give Equal results; a ResolvedRun survives encode/decode", () =>
    Effect.gen(function*() {
      const b = EventBuilder.make("r")
      const rows = commit("r", [
        b.opened(T1), b.user("u"), b.call("a", "Write", [1]), b.dispatched("a", "Write", [1]), b.call("b", "Read", {}),
        b.response("a", "Write", 2, { operationBound: true })
      ])
      const a = resolveOk(rows)
      const s = yield* RecoveryResolver.resolveStream(Stream.fromIterable(rows).pipe(Stream.rechunk(2)))
      let state = RecoveryResolver.initial()
      for (const row of rows) state = RecoveryResolver.step(state, row)
      assert.isTrue(Equal.equals(a, s))
      assert.isTrue(Equal.equals(a, Either.getOrThrow(RecoveryResolver.finish(state))))
      assert.isTrue(Equal.equals(a, Schema.decodeUnknownSync(ResolvedRun)(Schema.encodeSync(ResolvedRun)(a))))
      assert.isFalse(Equal.equals(a, resolveOk(rows.slice(0, 5))))
      const plan = yield* planResume(rows)
      assert.deepStrictEqual(plan.operations.map((o) => o.status), ["succeeded", "not_dispatched"])
    }))
})

// ---------------------------------------------------------------------------------------------------------------
// Properties. `ran` counts the cases each property actually ran; `seen` the reasons each injection produced.

const ran: Record<string, number> = {}
const seen: Record<string, Record<string, number>> = {}
const count = (name: string) => {
  ran[name] = (ran[name] ?? 0) + 1
}

afterAll(() => {
  const lines = Object.entries(ran).map(([name, n]) => {
    const reasons = seen[name] !== undefined ? ` → ${Object.entries(seen[name]!).map(([r, k]) => `${r}×${k}`).join(", ")}` : ""
    return `  ${String(n).padStart(5)}  ${name}${reasons}`
  })
  console.error(`RecoveryResolver property cases:\n${lines.join("\n")}\n  ${Object.values(ran).reduce((a, b) => a + b, 0)} in all`)
})

/** The expected decisions, computed independently from the events by the table of docs/spec/03-tool-boundary.md (the test's oracle). */
const oracle = (events: ReadonlyArray<RuntimeEvent>, protocol: ToolBoundary) => {
  const ops = new Map<string, { callId: string; callSeq: number; dispatchSeq?: number; responseSeq?: number; isError?: boolean }>()
  events.forEach((e, i) => {
    const body = e.body
    if (body._tag === "FunctionCall") ops.set(body.callId, { callId: body.callId, callSeq: i + 1 })
    else if (body._tag === "ToolDispatched") ops.get(body.callId)!.dispatchSeq = i + 1
    else if (body._tag === "FunctionResponse") Object.assign(ops.get(body.callId)!, { responseSeq: i + 1, isError: body.isError })
  })
  return [...ops.values()].map((o) => {
    const [decision, reason, origin] = o.responseSeq !== undefined
      ? ["completed", "matching_response", o.dispatchSeq !== undefined ? "normal_t2" : "pre_t1_synthetic"]
      : o.dispatchSeq !== undefined
      ? ["indeterminate", "dispatch_without_response", undefined]
      : protocol === T1
      ? ["definitely_not_dispatched", "new_protocol_before_dispatch", undefined]
      : ["indeterminate", "legacy_dispatch_unknown", undefined]
    return [o.callId, decision, reason, origin, o.callSeq, o.dispatchSeq, o.responseSeq, o.isError]
  })
}

const full = (run: ResolvedRun) =>
  run.operations.map((d) => [d.callId, d.decision, d.reason, d.origin, d.callSeq, d.dispatchSeq, d.responseSeq, d.isError])

const chunksOf = <A>(xs: ReadonlyArray<A>, n: number) =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => Chunk.fromIterable(xs.slice(i * n, i * n + n)))

const VALID_RUNS = 250
const STREAM_RUNS = 60

describe("RecoveryResolver properties over generated valid tool ledgers (FastCheck)", () => {
  it("is deterministic: resolving twice, and through the incremental fold, gives Equal results", () => {
    const name = "deterministic (resolve twice, fold)"
    FastCheck.assert(
      FastCheck.property(arbToolLedger(), (ledger) => {
        count(name)
        const a = resolveOk(ledger.rows)
        const again = resolveOk(commit(ledger.runId, ledger.events))
        const state = RecoveryResolver.stepAll(RecoveryResolver.initial(), ledger.rows)
        assert.isTrue(Equal.equals(a, again))
        assert.isTrue(Equal.equals(a, Either.getOrThrow(RecoveryResolver.finish(state))))
      }),
      { numRuns: VALID_RUNS }
    )
    assert.strictEqual(ran[name], VALID_RUNS)
  })

  it("a Stream of pages of any size resolves Equal to the Iterable", () => {
    const name = "deterministic (Stream of pages)"
    FastCheck.assert(
      FastCheck.property(arbToolLedger(), FastCheck.integer({ min: 1, max: 9 }), (ledger, size) => {
        count(name)
        const streamed = Effect.runSync(RecoveryResolver.resolveStream(Stream.fromChunks(...chunksOf(ledger.rows, size))))
        assert.isTrue(Equal.equals(resolveOk(ledger.rows), streamed))
      }),
      { numRuns: STREAM_RUNS }
    )
    assert.strictEqual(ran[name], STREAM_RUNS)
  })

  it("gives exactly one decision per distinct callId, in order of first appearance, as the table says, on every crash prefix", () => {
    const name = "one decision per callId, table oracle, random crash prefix"
    FastCheck.assert(
      FastCheck.property(arbToolLedger(), FastCheck.nat(), (ledger, cut) => {
        count(name)
        const run = resolveOk(ledger.rows)
        assert.deepStrictEqual(run.operations.map((d) => d.callId), ledger.calls.map((c) => c.callId))
        assert.strictEqual(new Set(run.operations.map((d) => d.callId)).size, run.operations.length)
        assert.deepStrictEqual(full(run), oracle(ledger.events, ledger.protocol))
        const n = 1 + (cut % ledger.events.length)
        const prefix = resolveOk(ledger.rows.slice(0, n))
        assert.deepStrictEqual(full(prefix), oracle(ledger.events.slice(0, n), ledger.protocol))
        assert.strictEqual(prefix.highWater.seq, n)
      }),
      { numRuns: VALID_RUNS }
    )
    assert.strictEqual(ran[name], VALID_RUNS)
  })

  it("planResume is derived from the resolver: statuses, seqs, decision and verification always agree", () => {
    const name = "plan agrees with resolver"
    FastCheck.assert(
      FastCheck.property(arbToolLedger(), (ledger) => {
        count(name)
        const run = resolveOk(ledger.rows)
        const plan = Either.getOrThrow(ResumePlanner.planIterable(ledger.rows))
        assert.strictEqual(plan.operations.length, run.operations.length)
        run.operations.forEach((d, i) => {
          const op = plan.operations[i]!
          const expected = d.decision === "completed"
            ? d.isError === true ? "failed" : "succeeded"
            : d.decision === "definitely_not_dispatched"
            ? "not_dispatched"
            : d.decision
          assert.deepStrictEqual(
            [op.callId, op.name, op.status, op.callSeq, op.dispatchSeq, op.responseSeq, op.operationId],
            [d.callId, d.name, expected, d.callSeq, d.dispatchSeq, d.responseSeq, d.operationId]
          )
        })
        const unsettled = run.operations.some((d) => d.decision !== "completed")
        assert.strictEqual(plan.decision, unsettled ? "blocked" : "safe_replay")
        assert.strictEqual(plan.requiresVerification, run.operations.some((d) => d.decision === "indeterminate"))
        assert.isTrue(Equal.equals(plan.highWater, run.highWater))
        assert.isTrue(Equal.equals(plan.terminal, run.terminal))
      }),
      { numRuns: VALID_RUNS }
    )
    assert.strictEqual(ran[name], VALID_RUNS)
  })

  it("a call without a committed response never appears in the replay, nor does any control fact", () => {
    const name = "unanswered call never replayed"
    FastCheck.assert(
      FastCheck.property(arbToolLedger({ needs: ["unanswered"] }), FastCheck.nat(), (ledger, cut) => {
        count(name)
        const n = 1 + (cut % ledger.events.length)
        for (const rows of [ledger.rows, ledger.rows.slice(0, n)]) {
          const plan = Either.getOrThrow(ResumePlanner.planIterable(rows))
          const replayed = new Set(plan.replay.map((r) => r.seq))
          const hi = rows.length
          const unanswered = ledger.calls.filter((c) => c.callIndex < hi && (c.responseIndex === undefined || c.responseIndex >= hi))
          assert.isTrue(unanswered.length > 0 || rows !== ledger.rows)
          for (const c of unanswered) assert.isFalse(replayed.has(c.callIndex + 1), `call ${c.callId} replayed without a response`)
          for (const seq of replayed) {
            const tag = rows[seq - 1]!.event.body._tag
            assert.include(["UserMessage", "ModelText", "FunctionCall", "FunctionResponse"], tag)
          }
        }
      }),
      { numRuns: VALID_RUNS }
    )
    assert.strictEqual(ran[name], VALID_RUNS)
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Injections: each is built on a random valid ledger at a random position and must ALWAYS be reported, by the
// resolver and by planResume alike, with the reason of docs/spec/01-ledger.md, at the injected event's seq.

const INJECTION_RUNS = 150
const INJECTED_ID = "injected-event"

interface Injection {
  readonly name: string
  readonly reason: LedgerCorruption["reason"]
  readonly protocol?: ToolBoundary
  readonly needs?: ReadonlyArray<Need>
  /** Builds the corrupt rows and returns them with the seq the corruption must be reported at. */
  readonly inject: (ledger: ToolLedger, n1: number, n2: number) => { rows: Array<CommittedRow>; seq: number; eventId: string }
}

const pick = <A>(xs: ReadonlyArray<A>, n: number): A => {
  assert.isAbove(xs.length, 0, "the generator must provide a candidate")
  return xs[n % xs.length]!
}

const inserted = (ledger: ToolLedger, p: number, event: RuntimeEvent) => {
  const e = withId(event, INJECTED_ID)
  return { rows: insertAt(ledger, p, e), seq: p + 1, eventId: INJECTED_ID }
}

const answered = (ledger: ToolLedger) => ledger.calls.filter((c) => c.responseIndex !== undefined)
const afterwards = (ledger: ToolLedger, index: number, n: number) => positionIn(ledger, index + 1, ledger.events.length, n)
const responseTo = (ledger: ToolLedger, c: CallFacts, name = c.name) => ledger.builder.response(c.callId, name, "late", { isError: false })

const injections: ReadonlyArray<Injection> = [
  {
    name: "orphan response (no call for its callId)",
    reason: "orphan_response",
    inject: (l, n1, n2) =>
      inserted(l, positionIn(l, 1, l.events.length, n1), l.builder.response("ghost", "Bash", 1, { operationBound: n2 % 2 === 0 }))
  },
  {
    name: "response before its call",
    reason: "orphan_response",
    needs: ["call"],
    inject: (l, n1, n2) => {
      const c = pick(l.calls, n2)
      return inserted(l, positionIn(l, 1, c.callIndex, n1), responseTo(l, c))
    }
  },
  {
    name: "duplicate call",
    reason: "duplicate_call",
    needs: ["call"],
    inject: (l, n1, n2) => {
      const c = pick(l.calls, n2)
      return inserted(l, afterwards(l, c.callIndex, n1), l.builder.call(c.callId, n2 % 3 === 0 ? "Other" : c.name, c.args))
    }
  },
  {
    name: "duplicate dispatch",
    reason: "duplicate_dispatch",
    protocol: T1,
    needs: ["dispatched"],
    inject: (l, n1, n2) => {
      const c = pick(l.calls.filter((c) => c.dispatchIndex !== undefined), n2)
      return inserted(l, afterwards(l, c.dispatchIndex!, n1), l.builder.dispatched(c.callId, c.name, c.args))
    }
  },
  {
    name: "duplicate response",
    reason: "duplicate_response",
    needs: ["answered"],
    inject: (l, n1, n2) => {
      const c = pick(answered(l), n2)
      return inserted(l, afterwards(l, c.responseIndex!, n1), responseTo(l, c))
    }
  },
  {
    name: "response name differs from its call's",
    reason: "name_mismatch",
    needs: ["call"],
    inject: (l, n1, n2) => {
      const c = pick(l.calls, n2)
      return inserted(l, positionIn(l, c.callIndex + 1, c.responseIndex ?? l.events.length, n1), responseTo(l, c, `${c.name}X`))
    }
  },
  {
    name: "dispatch without a call",
    reason: "orphan_dispatch",
    inject: (l, n1) => inserted(l, positionIn(l, 1, l.events.length, n1), l.builder.dispatched("ghost", "Bash", {}))
  },
  {
    name: "dispatch after its response",
    reason: "dispatch_order",
    needs: ["answeredUndispatched"],
    inject: (l, n1, n2) => {
      const c = pick(answered(l).filter((c) => c.dispatchIndex === undefined), n2)
      return inserted(l, afterwards(l, c.responseIndex!, n1), l.builder.dispatched(c.callId, c.name, c.args))
    }
  },
  {
    name: "args-hash tamper of a committed dispatch",
    reason: "args_hash_mismatch",
    protocol: T1,
    needs: ["dispatched"],
    inject: (l, _n1, n2) => {
      const c = pick(l.calls.filter((c) => c.dispatchIndex !== undefined), n2)
      const original = l.events[c.dispatchIndex!]!
      const tampered = withId(l.builder.dispatched(c.callId, c.name, { tampered: n2 }), original.id)
      return { rows: replaceAt(l, c.dispatchIndex!, tampered), seq: c.dispatchIndex! + 1, eventId: original.id }
    }
  },
  {
    name: "operation-id tamper of a dispatch or a T2 response",
    reason: "identity_mismatch",
    protocol: T1,
    needs: ["boundResponse"],
    inject: (l, n1, n2) => {
      const targets = l.calls.flatMap((c) => [
        ...(c.dispatchIndex !== undefined ? [{ at: c.dispatchIndex, callId: c.callId }] : []),
        ...(c.bound === true ? [{ at: c.responseIndex!, callId: c.callId }] : [])
      ])
      const { at, callId } = pick(targets, n2)
      const original = l.events[at]!
      const body = original.body
      const wrong: OperationId = n1 % 2 === 0
        ? deriveOperationId("inv-someone-else", callId)
        : deriveOperationId(l.builder.ids.invocationId, `${callId}-other`)
      const tamperedBody = body._tag === "ToolDispatched"
        ? new ToolDispatched({ callId: body.callId, operationId: wrong, argsHash: body.argsHash, recoveryMode: body.recoveryMode })
        : body._tag === "FunctionResponse"
        ? new FunctionResponse({ callId: body.callId, name: body.name, result: body.result, isError: body.isError, operationId: wrong })
        : assert.fail(`unexpected target ${body._tag}`)
      const tampered = new RuntimeEvent({ ...original, body: tamperedBody })
      return { rows: replaceAt(l, at, tampered), seq: at + 1, eventId: original.id }
    }
  }
]

describe("RecoveryResolver reports every injected fault with its reason at its seq (FastCheck)", () => {
  for (const injection of injections) {
    it(`${injection.name} → ${injection.reason}`, () => {
      const arb = arbToolLedger({
        ...(injection.protocol !== undefined ? { protocol: injection.protocol } : {}),
        ...(injection.needs !== undefined ? { needs: injection.needs } : {})
      })
      FastCheck.assert(
        FastCheck.property(arb, FastCheck.nat(), FastCheck.nat(), (ledger, n1, n2) => {
          count(injection.name)
          const { eventId, rows, seq } = injection.inject(ledger, n1, n2)
          const e = resolveErr(rows)
          const tally = (seen[injection.name] ??= {})
          tally[e.reason] = (tally[e.reason] ?? 0) + 1
          assert.strictEqual(e._tag, "LedgerCorruption")
          assert.deepStrictEqual([e.reason, e.seq, e.eventId, e.runId], [injection.reason, seq, eventId, ledger.runId])
          const planned = ResumePlanner.planIterable(rows)
          assert.isTrue(Either.isLeft(planned), "planResume must fail too")
          const p = (planned as Either.Left<LedgerCorruption, unknown>).left
          assert.deepStrictEqual([p._tag, p.reason, p.seq, p.eventId, p.message], [e._tag, e.reason, e.seq, e.eventId, e.message])
        }),
        { numRuns: INJECTION_RUNS }
      )
      assert.strictEqual(ran[injection.name], INJECTION_RUNS)
      assert.deepStrictEqual(seen[injection.name], { [injection.reason]: INJECTION_RUNS })
    })
  }
})
