// Tests of T1 with the call state read in its own write (`RuntimeEventStoreShape.dispatchUnsettled`, SQLite): what
// it writes and returns in every state docs/spec/03-tool-boundary.md names, and that the tool runtime over it ends as over the memory store.
import { NodeContext } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Either, Fiber, Layer, Schema } from "effect"
import { StoreWriteFailed } from "../src/Domain/Errors.js"
import { deriveOperationId } from "../src/Domain/Ids.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Tool from "../src/Domain/Tool.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { syncToolWritesOf } from "../src/Services/internal/syncToolWrites.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"

const openSqlite = (workspace: string) =>
  Layer.build(SqliteRuntimeEventStore.layer({ workspace })).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))

const addTool = Tool.make({
  name: "Add",
  args: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  recoveryMode: "idempotent",
  implementation: (args) => Effect.succeed({ sum: args.a + args.b })
})

// The dispatch the tool runtime would build for `callId` (the builder's idempotent dispatch, keyed by the operation id).
const dispatchOf = (b: EventBuilder.EventBuilder, callId: string) => b.dispatched(callId, "Add", { a: 1, b: 2 }, "idempotent")

const withSqlite = <A, E>(prefix: string, body: (store: RuntimeEventStoreShape) => Effect.Effect<A, E, RuntimeEventStore>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix })
    const store = yield* openSqlite(ws)
    return yield* body(store).pipe(Effect.provideService(RuntimeEventStore, store))
  }).pipe(Effect.provide(NodeContext.layer))

const tags = (rows: ReadonlyArray<{ readonly event: { readonly body: { readonly _tag: string } }; readonly seq: number; readonly end: number }>) =>
  rows.map((r) => [r.event.body._tag, r.seq, r.end])

describe("dispatchUnsettled (SQLite)", () => {
  it.scopedLive("a new call: the call and its dispatch in one write, as appendDispatch writes them", () =>
    withSqlite("rr-du-new-", (store) =>
      Effect.gen(function*() {
        assert.isDefined(store.dispatchUnsettled)
        const b = EventBuilder.make("du-new", 1000)
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("add")])
        const result = yield* store.dispatchUnsettled!(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(b, "c1"))
        assert.strictEqual(result._tag, "Dispatched")
        assert.deepStrictEqual(tags(result._tag === "Dispatched" ? result.rows : []), [["FunctionCall", 3, 4], ["ToolDispatched", 4, 4]])
        assert.deepStrictEqual(tags(yield* store.readRun(b.runId)).slice(2), [["FunctionCall", 3, 4], ["ToolDispatched", 4, 4]])
        const state = yield* store.toolCallState(b.runId, "c1")
        assert.strictEqual(state.call?.dispatchSeq, 4)
        assert.strictEqual(state.call?.operationId, deriveOperationId("inv-du-new", "c1"))
      })))

  it.scopedLive("a call the host committed: only its dispatch is written", () =>
    withSqlite("rr-du-host-", (store) =>
      Effect.gen(function*() {
        const b = EventBuilder.make("du-host", 1000)
        const call = b.call("c1", "Add", { a: 1, b: 2 })
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), call])
        const result = yield* store.dispatchUnsettled!(b.runId, call, dispatchOf(b, "c1"))
        assert.deepStrictEqual(tags(result._tag === "Dispatched" ? result.rows : []), [["ToolDispatched", 3, 3]])
        assert.strictEqual((yield* store.highWater(b.runId)).seq, 3)
      })))

  it.scopedLive("a dispatched call, another protocol, a sealed run, an unknown run: nothing written, the state returned", () =>
    withSqlite("rr-du-state-", (store) =>
      Effect.gen(function*() {
        const b = EventBuilder.make("du-state", 1000)
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1")])
        const call = b.call("c1", "Add", { a: 1, b: 2 })
        const dispatch = dispatchOf(b, "c1")
        yield* store.appendDispatch(b.runId, { call, dispatch })
        // The retry of a T1 whose acknowledgement was lost (the same events): the committed rows, nothing written.
        const again = yield* store.dispatchUnsettled!(b.runId, call, dispatch)
        assert.deepStrictEqual(tags(again._tag === "Dispatched" ? again.rows : []), [["FunctionCall", 2, 3], ["ToolDispatched", 3, 3]])
        // A second dispatch of the call (another ts: not the same bytes): the state, nothing written.
        const later = EventBuilder.make("du-state", 2000)
        const settled = yield* store.dispatchUnsettled!(b.runId, later.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(later, "c1"))
        assert.strictEqual(settled._tag, "State")
        assert.strictEqual(settled._tag === "State" ? settled.state.call?.dispatchSeq : undefined, 3)
        assert.strictEqual((yield* store.highWater(b.runId)).seq, 3)

        const none = EventBuilder.make("du-none", 1000)
        yield* store.append(none.runId, [none.opened("none")])
        const other = yield* store.dispatchUnsettled!(none.runId, none.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(none, "c1"))
        assert.deepStrictEqual(other, { _tag: "State", state: { toolBoundary: "none", terminalSeq: undefined, call: undefined } })
        assert.strictEqual((yield* store.highWater(none.runId)).seq, 1)

        const sealed = EventBuilder.make("du-sealed", 1000)
        yield* store.append(sealed.runId, [sealed.opened("t1_after_preflight_v1"), sealed.terminated("completed")])
        const closed = yield* store.dispatchUnsettled!(sealed.runId, sealed.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(sealed, "c1"))
        assert.strictEqual(closed._tag === "State" ? closed.state.terminalSeq : undefined, 2)
        assert.strictEqual((yield* store.highWater(sealed.runId)).seq, 2)

        const unknown = EventBuilder.make("du-unknown", 1000)
        const unread = yield* store.dispatchUnsettled!(unknown.runId, unknown.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(unknown, "c1"))
        assert.deepStrictEqual(unread, { _tag: "Unread" })
        assert.deepStrictEqual(yield* store.listRuns(), [b.runId, none.runId, sealed.runId])
      })))

  it.scopedLive("the tool runtime over it: the rows and errors the memory store gives", () =>
    Effect.gen(function*() {
      const scenario = Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        const b = EventBuilder.make("du-rt", 1000)
        const hosted = b.call("c2", "Add", { a: 2, b: 2 })
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("add"), hosted])
        const first = yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), { tools: [addTool] })
        const second = yield* ToolRuntime.run(b.runId, hosted, { tools: [addTool] })
        const replay = yield* Effect.either(ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), { tools: [addTool] }))
        const none = EventBuilder.make("du-rt-none", 1000)
        yield* store.append(none.runId, [none.opened("none")])
        const mismatch = yield* Effect.either(ToolRuntime.run(none.runId, none.call("c1", "Add", { a: 1, b: 2 }), { tools: [addTool] }))
        const missing = EventBuilder.make("du-rt-missing", 1000)
        const unknown = yield* Effect.either(ToolRuntime.run(missing.runId, missing.call("c1", "Add", { a: 1, b: 2 }), { tools: [addTool] }))
        const errorTag = (e: Either.Either<unknown, { readonly _tag: string }>) => Either.isLeft(e) ? e.left._tag : "Right"
        return {
          outcomes: [first._tag, second._tag],
          rows: tags(yield* store.readRun(b.runId)),
          replay: Either.isLeft(replay) ? replay.left._tag : replay.right._tag,
          errors: [errorTag(mismatch), errorTag(unknown)]
        }
      })
      const sqlite = yield* withSqlite("rr-du-rt-", () => scenario)
      const memory = yield* Effect.provide(scenario, MemoryRuntimeEventStore.layer)
      assert.deepStrictEqual(sqlite, memory)
      assert.deepStrictEqual(sqlite.outcomes, ["Completed", "Completed"])
      assert.deepStrictEqual(sqlite.errors, ["ToolProtocolMismatch", "ToolProtocolMismatch"])
    }))

  it.scopedLive("a T1 whose acknowledgement is lost is retried with the same events and converges: one dispatch, one response", () =>
    withSqlite("rr-du-lost-", (inner) =>
      Effect.gen(function*() {
        let lose = true
        const store: RuntimeEventStoreShape = {
          ...inner,
          dispatchUnsettled: (runId, call, dispatch) =>
            Effect.suspend(() => {
              const lost = lose
              lose = false
              const write = inner.dispatchUnsettled!(runId, call, dispatch)
              return lost ? Effect.zipRight(write, Effect.fail(new StoreWriteFailed({ runId, cause: "injected", message: "injected lost ack" }))) : write
            })
        }
        const b = EventBuilder.make("du-lost", 1000)
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1")])
        const outcome = yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), { tools: [addTool] }).pipe(
          Effect.provideService(RuntimeEventStore, store)
        )
        assert.strictEqual(outcome._tag, "Completed")
        assert.isFalse(lose)
        assert.deepStrictEqual(tags(yield* store.readRun(b.runId)), [
          ["RunOpened", 1, 1],
          ["FunctionCall", 2, 3],
          ["ToolDispatched", 3, 3],
          ["FunctionResponse", 4, 4]
        ])
      })))
  it.scopedLive("the synchronous T1 and T2 (SyncToolWrites): this store instance's only, and never while another write holds the file", () =>
    withSqlite("rr-du-now-", (store) =>
      Effect.gen(function*() {
        const now = syncToolWritesOf(store)
        assert.isDefined(now)
        // A wrapper is another object: its own methods are called, never the writes behind them.
        assert.isUndefined(syncToolWritesOf({ ...store }))
        const b = EventBuilder.make("du-now", 1000)
        yield* store.append(b.runId, [b.opened("t1_after_preflight_v1")])
        const t1 = now!.dispatchUnsettled(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), dispatchOf(b, "c1"))
        assert.isTrue(t1 !== undefined && Either.isRight(t1) && t1.right._tag === "Dispatched")
        // A second response of the same call is refused with the typed error the Effect method gives.
        const response = b.response("c1", "Add", { sum: 3 }, { operationBound: true })
        const t2 = now!.appendOutcome(b.runId, response)
        assert.isTrue(t2 !== undefined && Either.isRight(t2) && t2.right.seq === 4)
        const second = b.response("c1", "Add", { sum: 4 }, { operationBound: true })
        const again = now!.appendOutcome(b.runId, second)
        const viaEffect = yield* Effect.either(store.appendOutcome(b.runId, second))
        assert.isTrue(again !== undefined && Either.isLeft(again) && Either.isLeft(viaEffect))
        assert.deepStrictEqual(Either.isLeft(again!) ? again.left : undefined, Either.isLeft(viaEffect) ? viaEffect.left : undefined)
        // A tool cycle held inside its T2 (a failpoint that waits) holds the file: the synchronous writes do not run,
        // and a second cycle takes the store's Effect methods, which wait for it; both complete.
        const gate = yield* Deferred.make<void>()
        const entered = yield* Deferred.make<void>()
        const held = yield* ToolRuntime.run(b.runId, b.call("c2", "Add", { a: 2, b: 2 }), { tools: [addTool] }).pipe(
          Effect.provideService(Failpoints.Failpoints, {
            hit: (boundary) => boundary === "inside_t2" ? Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)) : Effect.void
          }),
          Effect.fork
        )
        yield* Deferred.await(entered)
        assert.isUndefined(now!.dispatchUnsettled(b.runId, b.call("c3", "Add", { a: 3, b: 2 }), dispatchOf(b, "c3")))
        const waiting = yield* Effect.fork(ToolRuntime.run(b.runId, b.call("c3", "Add", { a: 3, b: 2 }), { tools: [addTool] }))
        // A plain append meanwhile waits too (the store's own `append` runs in one step only when the file is free).
        const appending = yield* Effect.fork(store.append(b.runId, [b.user("meanwhile")]))
        yield* Deferred.succeed(gate, undefined)
        assert.strictEqual((yield* Fiber.join(held))._tag, "Completed")
        assert.strictEqual((yield* Fiber.join(waiting))._tag, "Completed")
        assert.strictEqual((yield* Fiber.join(appending)).length, 1)
        // The waiting cycle and the append commit in either order, after the held one.
        assert.deepStrictEqual(tags(yield* store.readRun(b.runId)).map(([tag]) => String(tag)).sort(), [
          "RunOpened",
          "FunctionCall",
          "ToolDispatched",
          "FunctionResponse",
          "FunctionCall",
          "ToolDispatched",
          "FunctionResponse",
          "FunctionCall",
          "ToolDispatched",
          "FunctionResponse",
          "UserMessage"
        ].sort())
      })))
})
