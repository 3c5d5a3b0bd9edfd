// The store conformance suite: one set of behaviours, written once, run against every RuntimeEventStore layer.
// Each case checks observable behaviour: rows, high-waters, typed refusals that write nothing, paging and order.
import { NodeContext } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Effect, Either, Equal, Layer, Stream } from "effect"
import type { Scope } from "effect"
import * as Digest from "../../src/Domain/Digest.js"
import { RunId } from "../../src/Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import { canonicalText, FunctionCall } from "../../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import { planResume } from "../../src/Domain/Rules/PlanResume.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../../src/Services/RuntimeEventStore.js"
import { recoveryConformance } from "./recoveryConformance.js"

/** How the suite opens a store over a workspace folder. */
export interface ConformanceTarget {
  readonly name: string
  /** A layer providing the store over `workspace` (a fresh temp folder per test; the memory store ignores it). */
  readonly layer: (workspace: string) => Layer.Layer<RuntimeEventStore, unknown>
  /** Whether a second layer over the same folder sees what the first one wrote. */
  readonly persistent: boolean
}

const rid = (s: string) => RunId.make(s)

/** Independently recomputes the chain of a run's rows. */
const expectedDigests = (runId: string, events: ReadonlyArray<RuntimeEvent>): Array<string> => {
  let d = Digest.genesis(runId)
  return events.map((e, i) => (d = Digest.next(d, i + 1, Either.getOrThrow(canonicalText(e)))))
}

const withStore = <A, E>(
  target: ConformanceTarget,
  f: (store: RuntimeEventStoreShape, workspace: string) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-conf-" })
    const store = yield* reopen(target, workspace)
    return yield* f(store, workspace)
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const reopen = (target: ConformanceTarget, workspace: string) =>
  Layer.build(target.layer(workspace)).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))

const refusedWith = (exit: Either.Either<unknown, { readonly _tag: string }>, tag: string, reason?: string) => {
  assert.isTrue(Either.isLeft(exit), `expected ${tag}${reason ? `(${reason})` : ""} but the append succeeded`)
  const err = (exit as Either.Left<{ _tag: string; reason?: string }, unknown>).left
  assert.strictEqual(err._tag, tag)
  if (reason !== undefined) assert.strictEqual(err.reason, reason)
}

/** Runs the conformance suite against one store target. */
export const conformance = (target: ConformanceTarget) =>
  describe(`RuntimeEventStore conformance: ${target.name}`, () => {
    it.live("single appends get dense seqs, end == seq, and the normative digest chain", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const b = EventBuilder.make("run-a")
          const events = [b.opened(), b.user("hi"), b.model("hello")]
          const rows: Array<CommittedRow> = []
          for (const e of events) rows.push(...(yield* store.append(rid("run-a"), [e])))
          const digests = expectedDigests("run-a", events)
          assert.deepStrictEqual(rows.map((r) => r.seq), [1, 2, 3])
          assert.deepStrictEqual(rows.map((r) => r.end), [1, 2, 3])
          assert.deepStrictEqual(rows.map((r) => r.digest), digests)
          const read = yield* store.readRun(rid("run-a"))
          assert.deepStrictEqual(read.map((r) => [r.seq, r.digest, r.event.id]), rows.map((r) => [r.seq, r.digest, r.event.id]))
          const hw = yield* store.highWater(rid("run-a"))
          assert.deepStrictEqual([hw.seq, hw.digest], [3, digests[2]])
        })))

    it.live("a multi-event append is one group: every row's end is the group's last seq", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const b = EventBuilder.make("run-g")
          yield* store.append(rid("run-g"), [b.opened()])
          const rows = yield* store.append(rid("run-g"), [b.user("u"), b.call("c1", "Bash", { a: 1 }), b.response("c1", "Bash", "ok")])
          assert.deepStrictEqual(rows.map((r) => [r.seq, r.end]), [[2, 4], [3, 4], [4, 4]])
          const read = yield* store.readRun(rid("run-g"))
          assert.deepStrictEqual(read.map((r) => r.end), [1, 4, 4, 4])
        })))

    it.live("compare-and-append accepts the current high-water and refuses any other", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const b = EventBuilder.make("run-c")
          yield* store.append(rid("run-c"), [b.opened()], { expectedHighWater: { seq: 0 } })
          const hw = yield* store.highWater(rid("run-c"))
          yield* store.append(rid("run-c"), [b.user("one")], { expectedHighWater: { seq: hw.seq, digest: hw.digest } })
          const stale = yield* store.append(rid("run-c"), [b.user("two")], { expectedHighWater: { seq: 1 } }).pipe(Effect.either)
          refusedWith(stale, "RuntimeOffsetMismatch")
          const err = (stale as Either.Left<any, unknown>).left
          assert.deepStrictEqual(err.expected, { seq: 1 })
          assert.strictEqual(err.actual.seq, 2)
          const wrongDigest = yield* store.append(rid("run-c"), [b.user("three")], {
            expectedHighWater: { seq: 2, digest: hw.digest }
          }).pipe(Effect.either)
          refusedWith(wrongDigest, "RuntimeOffsetMismatch")
          assert.strictEqual((yield* store.highWater(rid("run-c"))).seq, 2)
        })))

    it.live("every refused append writes nothing", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-r")
          const other = EventBuilder.make("run-o")
          yield* store.append(rid("run-o"), [other.opened(), other.user("x")])
          yield* store.append(rid("run-r"), [a.opened(), a.user("go"), a.call("c1", "Bash", { x: 1 }), a.response("c1", "Bash", 1)])
          const before = yield* store.readRun(rid("run-r"))
          const cases: Array<[string, ReadonlyArray<RuntimeEvent>, string, string?]> = [
            ["second opener", [a.opened()], "AppendRejected", "opener_invalid"],
            ["other session", [EventBuilder.make({ ...a.ids, sessionId: "sess-zzz" }).user("x")], "AppendRejected", "identity_mismatch"],
            ["event of another run", [other.user("y")], "AppendRejected", "identity_mismatch"],
            ["duplicate event id", [a.custom(a.user("q").body, { id: "run-o:1" })], "AppendRejected", "duplicate_event_id"],
            ["duplicate call", [a.call("c1", "Bash", { x: 1 })], "AppendRejected", "duplicate_call"],
            ["orphan response", [a.response("c9", "Bash", 1)], "AppendRejected", "orphan_response"],
            ["duplicate response", [a.response("c1", "Bash", 2)], "AppendRejected", "duplicate_response"],
            ["name mismatch", [a.call("c2", "Bash", {}), a.response("c2", "Read", 2)], "AppendRejected", "name_mismatch"],
            ["response before its call", [a.response("c3", "Bash", 2), a.call("c3", "Bash", {})], "AppendRejected", "orphan_response"],
            ["reserved dispatch", [a.call("c4", "Bash", {}), a.dispatched("c4", "Bash", {})], "AppendRejected", "reserved_fact"],
            ["reserved bound response", [a.call("c5", "Bash", {}), a.response("c5", "Bash", 1, { operationBound: true })], "AppendRejected", "reserved_fact"],
            ["too deep", [a.call("c6", "Bash", JSON.parse("[".repeat(300) + "]".repeat(300)))], "AppendRejected", "too_deep"],
            ["not strict JSON", [a.call("c7", "Bash", { n: Number.NaN })], "AppendRejected", "schema_invalid"],
            ["later event fails: none of the append lands", [a.user("fine"), a.model("fine"), a.response("c8", "Bash", 1)], "AppendRejected", "orphan_response"],
            ["empty append", [], "AppendRejected"]
          ]
          for (const [label, events, tag, reason] of cases) {
            const exit = yield* store.append(rid("run-r"), events).pipe(Effect.either)
            assert.isTrue(Either.isLeft(exit), `${label}: expected a refusal`)
            refusedWith(exit, tag, reason)
          }
          const after = yield* store.readRun(rid("run-r"))
          assert.deepStrictEqual(after.map((r) => r.digest), before.map((r) => r.digest))
        })))

    it.live("an event too large is refused with too_large", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-big")
          yield* store.append(rid("run-big"), [a.opened()])
          const exit = yield* store.append(rid("run-big"), [a.user("x".repeat(16 * 1024 * 1024 + 1))]).pipe(Effect.either)
          refusedWith(exit, "AppendRejected", "too_large")
          assert.strictEqual((yield* store.highWater(rid("run-big"))).seq, 1)
        })))

    it.live("a sealed run refuses generic appends with RunSealed", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-s")
          yield* store.append(rid("run-s"), [a.opened(), a.terminated("completed")])
          refusedWith(yield* store.append(rid("run-s"), [a.user("late")]).pipe(Effect.either), "RunSealed")
          refusedWith(yield* store.append(rid("run-s"), [a.terminated("failed")]).pipe(Effect.either), "RunSealed")
          assert.strictEqual((yield* store.highWater(rid("run-s"))).seq, 2)
        })))

    it.live("an invocation belongs to one run", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-i1")
          const b = EventBuilder.make({ ...EventBuilder.idsFor("run-i2"), invocationId: "inv-run-i1" })
          yield* store.append(rid("run-i1"), [a.opened()])
          refusedWith(yield* store.append(rid("run-i2"), [b.opened()]).pipe(Effect.either), "AppendRejected", "identity_mismatch")
          refusedWith(yield* store.readRun(rid("run-i2")).pipe(Effect.either), "RunNotFound")
        })))

    it.live("appendBatch writes several runs all or nothing", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-b1")
          const b = EventBuilder.make("run-b2")
          const bad = yield* store.appendBatch([
            { runId: rid("run-b1"), events: [a.opened(), a.user("x")] },
            { runId: rid("run-b2"), events: [b.user("no opener")] }
          ]).pipe(Effect.either)
          refusedWith(bad, "AppendRejected", "opener_invalid")
          refusedWith(yield* store.readRun(rid("run-b1")).pipe(Effect.either), "RunNotFound")
          const a2 = EventBuilder.make("run-b1")
          const b2 = EventBuilder.make("run-b2")
          const rows = yield* store.appendBatch([
            { runId: rid("run-b1"), events: [a2.opened(), a2.user("x")] },
            { runId: rid("run-b2"), events: [b2.opened()] }
          ])
          assert.deepStrictEqual(rows.map((r) => r.map((x) => [x.seq, x.end])), [[[1, 2], [2, 2]], [[1, 1]]])
          assert.deepStrictEqual(yield* store.listRuns(), [rid("run-b1"), rid("run-b2")])
          const dupAcross = yield* store.appendBatch([
            { runId: rid("run-b3"), events: [EventBuilder.make("run-b3").custom(a2.opened().body, { id: "shared-id" })] },
            { runId: rid("run-b4"), events: [EventBuilder.make("run-b4").custom(a2.opened().body, { id: "shared-id" })] }
          ]).pipe(Effect.either)
          refusedWith(dupAcross, "AppendRejected", "duplicate_event_id")
        })))

    it.live("restore mode accepts dispatch facts that read back clean, and still refuses corruption", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-t")
          yield* store.appendBatch([{
            runId: rid("run-t"),
            events: [a.opened("t1_after_preflight_v1"), a.user("u"), a.call("c1", "Bash", { q: 1 }), a.dispatched("c1", "Bash", { q: 1 }), a.response("c1", "Bash", "done", { operationBound: true })]
          }], { mode: "restore" })
          const rows = yield* store.readRun(rid("run-t"))
          assert.strictEqual(rows.length, 5)
          const t = EventBuilder.make("run-t2")
          const bad = yield* store.appendBatch([{
            runId: rid("run-t2"),
            events: [t.opened("t1_after_preflight_v1"), t.call("c1", "Bash", { q: 1 }), t.dispatched("c1", "Bash", { q: 2 })]
          }], { mode: "restore" }).pipe(Effect.either)
          refusedWith(bad, "AppendRejected", "args_hash_mismatch")
        })))

    it.live("readRun honours upToSeq and refuses one beyond the high-water; unknown runs are RunNotFound", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-u")
          yield* store.append(rid("run-u"), [a.opened(), a.user("1"), a.model("2")])
          assert.deepStrictEqual((yield* store.readRun(rid("run-u"), { upToSeq: 2 })).map((r) => r.seq), [1, 2])
          refusedWith(yield* store.readRun(rid("run-u"), { upToSeq: 4 }).pipe(Effect.either), "RuntimeOffsetMismatch")
          refusedWith(yield* store.readRun(rid("nope")).pipe(Effect.either), "RunNotFound")
          refusedWith(yield* store.highWater(rid("nope")).pipe(Effect.either), "RunNotFound")
          refusedWith(yield* Stream.runCollect(store.readRunPages(rid("nope"), 10)).pipe(Effect.either), "RunNotFound")
        })))

    it.live("readRowsAt returns the rows at the seqs asked, in that order, equal to readRun's; outside the run it refuses", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-at")
          yield* store.append(rid("run-at"), [a.opened(), a.user("1"), a.model("2")])
          yield* store.append(rid("run-at"), [a.call("c1", "Bash", { n: 1 }), a.user("3")])
          const all = yield* store.readRun(rid("run-at"))
          const picked = yield* store.readRowsAt(rid("run-at"), [4, 1, 5, 4])
          assert.deepStrictEqual(picked.map((r) => [r.seq, r.end, r.digest, r.event.id]), [4, 1, 5, 4].map((s) => {
            const r = all[s - 1]!
            return [r.seq, r.end, r.digest, r.event.id]
          }))
          assert.deepStrictEqual(yield* store.readRowsAt(rid("run-at"), []), [])
          refusedWith(yield* store.readRowsAt(rid("run-at"), [6]).pipe(Effect.either), "RuntimeOffsetMismatch")
          refusedWith(yield* store.readRowsAt(rid("run-at"), [0]).pipe(Effect.either), "RuntimeOffsetMismatch")
          refusedWith(yield* store.readRowsAt(rid("nope"), [1]).pipe(Effect.either), "RunNotFound")
        })))

    it.live("readRunPages yields the same rows as readRun, and plans Equal to the in-memory plan", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-p")
          yield* store.append(rid("run-p"), [a.opened(), a.user("q"), a.call("c1", "Bash", {}), a.response("c1", "Bash", 1), a.model("m"), a.call("c2", "Read", {})])
          const all = yield* store.readRun(rid("run-p"))
          const paged = Chunk.toReadonlyArray(yield* Stream.runCollect(store.readRunPages(rid("run-p"), 2)))
          assert.deepStrictEqual(paged.map((r) => [r.seq, r.digest]), all.map((r) => [r.seq, r.digest]))
          const p1 = yield* planResume(all)
          const p2 = yield* planResume(store.readRunPages(rid("run-p"), 4))
          assert.isTrue(Equal.equals(p1, p2))
          assert.strictEqual(p1.decision, "blocked")
        })))

    it.live("listRuns is in order of first commit; exportRows is every row in commit order", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const x = EventBuilder.make("zeta")
          const y = EventBuilder.make("alpha")
          yield* store.append(rid("zeta"), [x.opened()])
          yield* store.append(rid("alpha"), [y.opened()])
          yield* store.append(rid("zeta"), [x.user("1")])
          yield* store.append(rid("alpha"), [y.user("2"), y.model("3")])
          assert.deepStrictEqual(yield* store.listRuns(), [rid("zeta"), rid("alpha")])
          const rows = Chunk.toReadonlyArray(yield* Stream.runCollect(store.exportRows()))
          assert.deepStrictEqual(rows.map((r) => `${r.event.runId}:${r.seq}:${r.end}`), [
            "zeta:1:1",
            "alpha:1:1",
            "zeta:2:2",
            "alpha:2:3",
            "alpha:3:3"
          ])
        })))

    it.live("concurrent appends to one run from many fibers are serialized: dense seqs, nothing lost", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-x")
          yield* store.append(rid("run-x"), [a.opened()])
          const events = Array.from({ length: 40 }, (_, i) => a.user(`m${i}`))
          yield* Effect.forEach(events, (e) => store.append(rid("run-x"), [e]), { concurrency: 8 })
          const rows = yield* store.readRun(rid("run-x"))
          assert.deepStrictEqual(rows.map((r) => r.seq), Array.from({ length: 41 }, (_, i) => i + 1))
          assert.deepStrictEqual(new Set(rows.slice(1).map((r) => r.event.id)), new Set(events.map((e) => e.id)))
        })))

    it.live("reads return strictly decoded events equal in content to what was appended", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-d")
          const call = a.call("c1", "Bash", { nested: { "10": 1, "9": [true, null, -0, 1.5e300, "é\u0000\ud800"] } })
          yield* store.append(rid("run-d"), [a.opened(), call])
          const rows = yield* store.readRun(rid("run-d"))
          const body = rows[1]!.event.body
          assert.isTrue(body instanceof FunctionCall)
          assert.strictEqual(
            JSON.stringify((body as FunctionCall).args),
            JSON.stringify({ nested: { "10": 1, "9": [true, null, 0, 1.5e300, "é\u0000\ud800"] } })
          )
          assert.strictEqual(Either.getOrThrow(canonicalText(rows[1]!.event)), Either.getOrThrow(canonicalText(call)))
        })))

    it.live("readRunFrom: a window of rows by seq, equal to the same rows of readRun; past the tail none; unknown run RunNotFound", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const w = EventBuilder.make("run-w")
          yield* store.append(rid("run-w"), [w.opened(), w.user("1")])
          yield* store.append(rid("run-w"), [w.model("2"), w.user("3"), w.model("4")])
          yield* store.append(rid("run-w"), [w.user("5"), w.model("6")])
          const other = EventBuilder.make("run-w2")
          yield* store.append(rid("run-w2"), [other.opened(), other.user("x")])
          const all = yield* store.readRun(rid("run-w"))
          const key = (rows: ReadonlyArray<CommittedRow>) => rows.map((r) => [r.seq, r.end, r.digest, r.event.id])
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w"), 1, 3)), key(all.slice(0, 3)))
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w"), 3, 2)), key(all.slice(2, 4)))
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w"), 5, 100)), key(all.slice(4)))
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w"), 7, 1)), key(all.slice(6)))
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w"), 0, 2)), key(all.slice(0, 2)))
          assert.deepStrictEqual(yield* store.readRunFrom(rid("run-w"), 8, 10), [])
          assert.deepStrictEqual(yield* store.readRunFrom(rid("run-w"), 2, 0), [])
          const window = yield* store.readRunFrom(rid("run-w"), 4, 1)
          assert.strictEqual(Either.getOrThrow(canonicalText(window[0]!.event)), Either.getOrThrow(canonicalText(all[3]!.event)))
          assert.deepStrictEqual(key(yield* store.readRunFrom(rid("run-w2"), 2, 5)), key((yield* store.readRun(rid("run-w2"))).slice(1)))
          const missing = yield* Effect.either(store.readRunFrom(rid("run-none"), 1, 10))
          refusedWith(missing, "RunNotFound")
        })))

    it.live("dedicated writers: T1 writes call + dispatch, T2 the bound response; exact retries converge, others are refused", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const a = EventBuilder.make("run-w")
          const r = rid("run-w")
          yield* store.append(r, [a.opened("t1_after_preflight_v1"), a.user("go")])
          const call = a.call("c1", "Bash", { q: 1 })
          const dispatch = a.dispatched("c1", "Bash", { q: 1 }, "idempotent")
          const t1 = yield* store.appendDispatch(r, { call, dispatch })
          assert.deepStrictEqual(t1.map((x) => [x.seq, x.end]), [[3, 4], [4, 4]])
          const state = yield* store.toolCallState(r, "c1")
          assert.strictEqual(state.toolBoundary, "t1_after_preflight_v1")
          assert.strictEqual(state.call?.dispatchSeq, 4)
          // An exact retry returns the committed rows and writes nothing.
          const again = yield* store.appendDispatch(r, { call, dispatch })
          assert.deepStrictEqual(again.map((x) => [x.seq, x.digest]), t1.map((x) => [x.seq, x.digest]))
          assert.strictEqual((yield* store.highWater(r)).seq, 4)
          // A second dispatch with other ids (a new process) is duplicate_dispatch.
          const other = EventBuilder.make("run-w")
          const second = yield* store.appendDispatch(r, { dispatch: other.custom(dispatch.body, { id: "other-dispatch" }) }).pipe(Effect.either)
          refusedWith(second, "AppendRejected", "duplicate_dispatch")
          // Same id, other bytes: not exact.
          const changed = other.custom(new (dispatch.body.constructor as any)({ ...dispatch.body, recoveryMode: "never_auto_retry" }), { id: dispatch.id })
          refusedWith(yield* store.appendDispatch(r, { dispatch: changed }).pipe(Effect.either), "AppendRejected", "duplicate_dispatch")
          // T1 writes only a call and a dispatch; generic append still refuses the reserved facts.
          refusedWith(yield* store.appendDispatch(r, { dispatch: a.user("x") }).pipe(Effect.either), "AppendRejected", "reserved_fact")
          const response = a.response("c1", "Bash", "done", { operationBound: true })
          refusedWith(yield* store.append(r, [response]).pipe(Effect.either), "AppendRejected", "reserved_fact")
          refusedWith(yield* store.append(r, [a.response("c1", "Bash", "unbound")]).pipe(Effect.either), "AppendRejected", "reserved_fact")
          refusedWith(yield* store.appendOutcome(r, a.response("c1", "Bash", "unbound")).pipe(Effect.either), "AppendRejected", "reserved_fact")
          const t2 = yield* store.appendOutcome(r, response)
          assert.deepStrictEqual([t2.seq, t2.end], [5, 5])
          const t2again = yield* store.appendOutcome(r, response)
          assert.strictEqual(t2again.digest, t2.digest)
          const secondResponse = other.custom(response.body, { id: "other-response" })
          refusedWith(yield* store.appendOutcome(r, secondResponse).pipe(Effect.either), "AppendRejected", "duplicate_response")
          // An exact retry that is no longer the tail is refused.
          yield* store.append(r, [a.model("after")])
          refusedWith(yield* store.appendOutcome(r, response).pipe(Effect.either), "AppendRejected", "duplicate_response")
          refusedWith(yield* store.appendDispatch(r, { dispatch }).pipe(Effect.either), "AppendRejected", "duplicate_dispatch")
          refusedWith(yield* store.appendDispatch(r, { call, dispatch }).pipe(Effect.either), "AppendRejected", "duplicate_event_id")
          const rows = yield* store.readRun(r)
          assert.deepStrictEqual(rows.map((x) => x.event.body._tag), ["RunOpened", "UserMessage", "FunctionCall", "ToolDispatched", "FunctionResponse", "ModelText"])
          const plan = yield* planResume(rows)
          assert.deepStrictEqual(plan.operations.map((op) => op.status), ["succeeded"])
        })))

    it.live("dedicated writers refuse a legacy run, an undispatched T2, a sealed run and a stale high-water", () =>
      withStore(target, (store) =>
        Effect.gen(function*() {
          const legacy = EventBuilder.make("run-l")
          yield* store.append(rid("run-l"), [legacy.opened("none"), legacy.call("c1", "Bash", {})])
          refusedWith(yield* store.appendDispatch(rid("run-l"), { dispatch: legacy.dispatched("c1", "Bash", {}) }).pipe(Effect.either), "AppendRejected", "reserved_fact")
          const a = EventBuilder.make("run-n")
          const r = rid("run-n")
          yield* store.append(r, [a.opened("t1_after_preflight_v1"), a.call("c1", "Bash", {})])
          refusedWith(yield* store.appendOutcome(r, a.response("c1", "Bash", 1, { operationBound: true })).pipe(Effect.either), "AppendRejected", "reserved_fact")
          refusedWith(yield* store.appendDispatch(r, { dispatch: a.dispatched("c1", "Bash", { other: 1 }) }).pipe(Effect.either), "AppendRejected", "args_hash_mismatch")
          refusedWith(yield* store.appendDispatch(r, { dispatch: a.dispatched("c1", "Bash", {}) }, { expectedHighWater: { seq: 1 } }).pipe(Effect.either), "RuntimeOffsetMismatch")
          const d = yield* store.appendDispatch(r, { dispatch: a.dispatched("c1", "Bash", {}) }, { expectedHighWater: { seq: 2 } })
          assert.strictEqual(d[0]!.seq, 3)
          const s = EventBuilder.make("run-sealed")
          yield* store.append(rid("run-sealed"), [s.opened("t1_after_preflight_v1"), s.terminated("failed")])
          refusedWith(yield* store.appendDispatch(rid("run-sealed"), { call: s.call("c1", "Bash", {}), dispatch: s.dispatched("c1", "Bash", {}) }).pipe(Effect.either), "RunSealed")
          assert.strictEqual((yield* store.highWater(rid("run-sealed"))).seq, 2)
          const none = yield* store.toolCallState(rid("nope"), "c1")
          assert.deepStrictEqual([none.toolBoundary, none.terminalSeq, none.call], [undefined, undefined, undefined])
        })))

    if (target.persistent) {
      it.live("a second store instance over the same workspace reads the same rows and continues the chain", () =>
        withStore(target, (store, workspace) =>
          Effect.gen(function*() {
            const a = EventBuilder.make("run-re")
            yield* store.append(rid("run-re"), [a.opened(), a.user("1")])
            const reopened = yield* reopen(target, workspace)
            const rows = yield* reopened.readRun(rid("run-re"))
            assert.deepStrictEqual(rows.map((r) => r.seq), [1, 2])
            const hw = yield* reopened.highWater(rid("run-re"))
            assert.strictEqual(hw.digest, rows[1]!.digest)
          })))
    }
  
    recoveryConformance(target)
  })
